#!/bin/bash
# Run 3 (GPU only): run3_gluon_pairs.py.   OUT=... bash benchmarks/results/2026-12-02-h200-t/run3.sh
set -u
cd "$(dirname "$0")/../../.."
mkdir -p $OUT/run3
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run3/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run3/gpu.txt
PYTHONUNBUFFERED=1 PYTHONPATH=src timeout 300 python3 benchmarks/results/2026-12-02-h200-t/run3_gluon_pairs.py \
  > $OUT/run3/pairs.txt 2>&1; echo "exit $?" >> $OUT/run3/pairs.txt
grep -v "^ *$" $OUT/run3/pairs.txt | grep -v "error vs" ; grep -c "bitwise equal to triton 64x128 w4 s4: True" $OUT/run3/pairs.txt; grep "False\|Error" $OUT/run3/pairs.txt | head
