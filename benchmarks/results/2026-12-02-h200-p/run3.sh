#!/bin/bash
# Run 3: the so2 GPU tests on this tree's 1-D grid (the fused route's bitwise contract with the
# relay included); the dyt bf16 backward keys not re-swept after 9231166's dalpha accumulator
# (2026-12-02-h200-n run 6's last step), exported; benchmarks/so2_backward_gemm.py (each backward
# GEMM launch within 1.15x of the forward launch of the same size).
#   OUT=... bash benchmarks/results/2026-12-02-h200-p/run3.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-p3
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a $OUT/gpu.txt
timeout 220 python3 -m pytest -q -p no:cacheprovider tests/test_so2_kernels.py tests/test_so2_backward_weights.py \
  tests/test_so2_level3.py tests/test_so2_compose.py tests/test_so2_forward_key.py > $OUT/pytest.txt 2>&1
echo "pytest exit $?" >> $OUT/pytest.txt; tail -3 $OUT/pytest.txt
shapes=""; for w in 16 32 64 128 256 4096; do shapes="$shapes --shape $((67108864 / w))x$w"; done
timeout 200 python3 -m tilefuse.cli tune --op dyt --dtype bf16 --pass bwd $shapes --force --no-progress \
  > $OUT/tune-dyt.txt 2>&1; echo "tune exit $?" >> $OUT/tune-dyt.txt
python3 -m tilefuse.cli tune --export-builtin $OUT >> $OUT/tune-dyt.txt 2>&1
grep -E "^dyt  |exit" $OUT/tune-dyt.txt
timeout 140 python3 benchmarks/so2_backward_gemm.py 2>&1 | grep -v Warn | tee $OUT/so2_backward_gemm.txt | tail -30
