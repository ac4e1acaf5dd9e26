#!/bin/bash
# Run 5 (GPU only): run5_gluon_3xfp16.py, the level-3 layer GEMM in Gluon (pointer and TMA weights) with one wgmma wait a
# K tile against so2_gemm_kernel's 3xfp16.   OUT=... bash benchmarks/results/2026-12-02-h200-t/run5.sh
set -u
cd "$(dirname "$0")/../../.."
mkdir -p $OUT/run5
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run5/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run5/gpu.txt
PYTHONUNBUFFERED=1 PYTHONPATH=src timeout 300 python3 benchmarks/results/2026-12-02-h200-t/run5_gluon_3xfp16.py \
  > $OUT/run5/gluon.txt 2>&1; echo "exit $?" >> $OUT/run5/gluon.txt
grep -E "##|bitwise|vs triton|exit|Error" $OUT/run5/gluon.txt | head -60
