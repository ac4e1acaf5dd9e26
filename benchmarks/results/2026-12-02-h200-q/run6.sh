#!/bin/bash
# Run 6 (prepared, GPU only): run6_gluon.py, the 3xfp16 layer GEMM in Gluon with its wgmma
# chain issued asynchronously, against so2_gemm_kernel's 3xfp16 (bitwise, error, time).
#   OUT=... bash benchmarks/results/2026-12-02-h200-q/run6.sh
set -u
cd "$(dirname "$0")/../../.."
mkdir -p $OUT/run6
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run6/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run6/gpu.txt
PYTHONUNBUFFERED=1 PYTHONPATH=src timeout 240 python3 benchmarks/results/2026-12-02-h200-q/run6_gluon.py \
  > $OUT/run6/gluon.txt 2>&1; echo "exit $?" >> $OUT/run6/gluon.txt
grep -E "##|bitwise|vs triton|error|exit|Error" $OUT/run6/gluon.txt | head -60
