#!/bin/bash
# Run 5 (GPU only): the ws tests on the shipped kernel (the cursor at each tile's start again);
# benchmarks/grouped_compose_gpu_check.py at interleave 32: bf16 and fp8_block as users call
# them on the built-in table with run 4's fp8 entries, beside the composition and its compiled form.
#   OUT=... bash benchmarks/results/2026-12-03-h200-z/run5.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-z5
mkdir -p $OUT/run5
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run5/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run5/gpu.txt
timeout 100 python3 -m pytest -q -x -p no:cacheprovider tests/test_grouped_mlp_ws.py > $OUT/run5/pytest-ws.txt 2>&1
echo "exit $?" >> $OUT/run5/pytest-ws.txt; tail -3 $OUT/run5/pytest-ws.txt
timeout 400 python3 benchmarks/grouped_compose_gpu_check.py --interleaves 32 --rounds 5 > $OUT/run5/check.txt 2>&1
echo "exit $?" >> $OUT/run5/check.txt
grep -v "^ *[0-9.]* ms  *x\|Warn" $OUT/run5/check.txt | tail -45
