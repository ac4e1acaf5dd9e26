#!/bin/bash
# Run 4 (GPU only): run3_gluon_pairs.py cols (the wgrads' layout).
#   OUT=... bash benchmarks/results/2026-12-02-h200-t/run4.sh
set -u
cd "$(dirname "$0")/../../.."
mkdir -p $OUT/run4
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run4/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run4/gpu.txt
PYTHONUNBUFFERED=1 PYTHONPATH=src timeout 300 python3 benchmarks/results/2026-12-02-h200-t/run3_gluon_pairs.py cols \
  > $OUT/run4/cols.txt 2>&1; echo "exit $?" >> $OUT/run4/cols.txt
grep -v "^ *$" $OUT/run4/cols.txt | grep -v "error vs" ; grep -c "bitwise equal to triton 64x128 w4 s4: True" $OUT/run4/cols.txt; grep "False\|Error" $OUT/run4/cols.txt | head
