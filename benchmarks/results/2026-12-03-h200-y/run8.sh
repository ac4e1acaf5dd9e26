#!/bin/bash
# Run 8 (GPU only; prepared, not run): bisect run 7's fault (run8_ws_bisect.py).
#   OUT=... bash benchmarks/results/2026-12-03-h200-y/run8.sh
set -u
cd "$(dirname "$0")/../../.."
mkdir -p $OUT/run8
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run8/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run8/gpu.txt
PYTHONUNBUFFERED=1 PYTHONPATH=src timeout 200 python3 benchmarks/results/2026-12-03-h200-y/run8_ws_bisect.py \
  > $OUT/run8/bisect.txt 2>&1; echo "exit $?" >> $OUT/run8/bisect.txt
cat $OUT/run8/bisect.txt
