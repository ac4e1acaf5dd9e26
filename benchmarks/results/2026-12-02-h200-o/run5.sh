#!/bin/bash
# Run 5: tests/test_dyt_lean.py with the memory-growth test's three windows (run 3 failed its
# single window), then tests/test_grouped_mlp_recipes.py with fp8_block's wgrads through TMA by
# default (eb6b549) and run 3's table entries.
#   OUT=... bash benchmarks/results/2026-12-02-h200-o/run5.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-run5
timeout -s INT -k 20 100 python3 -m pytest -q -p no:cacheprovider -rfs --tb=short tests/test_dyt_lean.py \
  > $OUT/pytest-dyt-lean.txt 2>&1
echo "exit $?" >> $OUT/pytest-dyt-lean.txt; grep -E "FAILED|ERROR|passed|failed|exit|grew" $OUT/pytest-dyt-lean.txt | cut -c1-400
timeout -s INT -k 20 200 python3 -m pytest -q -p no:cacheprovider -rfs --tb=short tests/test_grouped_mlp_recipes.py \
  > $OUT/pytest-recipes.txt 2>&1
echo "exit $?" >> $OUT/pytest-recipes.txt; grep -E "FAILED|ERROR|passed|failed|exit" $OUT/pytest-recipes.txt | cut -c1-400
