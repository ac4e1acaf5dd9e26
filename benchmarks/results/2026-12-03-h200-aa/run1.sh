#!/bin/bash
# Run 1 (GPU only): the ws tests on the final ws kernel (coalesced store); the op as users call
# it on the built-in table (grouped_compose_gpu_check at interleave 32); every kernel of a bf16
# and a fp8_block step in launch order (run1_profile.py).
#   OUT=... bash benchmarks/results/2026-12-03-h200-aa/run1.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-aa1
mkdir -p $OUT/run1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run1/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run1/gpu.txt
timeout 120 python3 -m pytest -q -x -p no:cacheprovider tests/test_grouped_mlp_ws.py > $OUT/run1/pytest-ws.txt 2>&1
echo "exit $?" >> $OUT/run1/pytest-ws.txt; tail -3 $OUT/run1/pytest-ws.txt
timeout 150 python3 benchmarks/results/2026-12-03-h200-aa/run1_profile.py > $OUT/run1/profile.txt 2>&1
echo "exit $?" >> $OUT/run1/profile.txt
grep -v "^  *[0-9.]* ms  " $OUT/run1/profile.txt
timeout 300 python3 benchmarks/grouped_compose_gpu_check.py --interleaves 32 --rounds 5 > $OUT/run1/check.txt 2>&1
echo "exit $?" >> $OUT/run1/check.txt
grep -v "^ *[0-9.]* ms  *[0-9.]*x\|Warn" $OUT/run1/check.txt | tail -40
