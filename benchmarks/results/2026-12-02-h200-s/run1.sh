#!/bin/bash
# Run 1: the grouped GPU tests after the fp8 wgrad change (recipes file; the kernels file's
# fp8, TMA and wgrad tests).
#   OUT=... bash benchmarks/results/2026-12-02-h200-s/run1.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-s1
mkdir -p $OUT/run1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run1/gpu.txt
git log -1 --format=%H > $OUT/run1/commit.txt 2>/dev/null
timeout 400 python3 -m pytest -q -p no:cacheprovider tests/test_grouped_mlp_recipes.py \
  tests/test_grouped_mlp_kernels.py -k "fp8 or tma or wgrad or recipe or register" > $OUT/run1/pytest.txt 2>&1
echo "pytest exit $?" >> $OUT/run1/pytest.txt; grep -E "FAILED|ERROR|passed|failed|exit" $OUT/run1/pytest.txt | tail -12
