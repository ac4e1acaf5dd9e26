#!/bin/bash
# Run 4: run2_row_resident.py --decompose at Neo with the phase-2 K steps overlapped (step k's three wgmma issued
# before step k - 1's product is waited for and joined), whole kernel and phase 2 alone, against run 3's forms.
#   OUT=... bash benchmarks/results/2026-12-03-h200-w/run4.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 TILEFUSE_CACHE_DIR=$PWD/.tfcache-w4
mkdir -p $OUT/run4
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run4/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run4/gpu.txt
PYTHONPATH=src timeout 200 python3 benchmarks/results/2026-12-03-h200-w/run2_row_resident.py --decompose > $OUT/run4/decompose.txt 2>&1
echo "exit $?" >> $OUT/run4/decompose.txt
grep -E "^\||^  |exit|Error" $OUT/run4/decompose.txt | tail -14
# and run4_overlap_gemm.py: the shipped wgmma GEMM's K steps overlapped the same way (64x64 tiles), bitwise and timed
PYTHONPATH=src timeout 200 python3 benchmarks/results/2026-12-03-h200-w/run4_overlap_gemm.py > $OUT/run4/overlap_gemm.txt 2>&1
echo "exit $?" >> $OUT/run4/overlap_gemm.txt
grep -E "ms \(|bitwise|exit|Error" $OUT/run4/overlap_gemm.txt | tail -14
