#!/bin/bash
# Run 3 (GPU only): the op as users call it on run 2's table (copied into the checkout's built-in
# table before this run), against the compiled composition and the compose route; then the
# check's grouped tests, which run 2's pytest did not reach in its time.
#   OUT=... bash benchmarks/results/2026-12-03-h200-ab/run3.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-ab3
mkdir -p $OUT/run3
timeout 300 python3 benchmarks/grouped_compose_gpu_check.py --interleaves 32 --rounds 5 > $OUT/run3/check.txt 2>&1
echo "exit $?" >> $OUT/run3/check.txt
grep -v "^ *[0-9.]* ms  *[0-9.]*x\|Warn" $OUT/run3/check.txt | tail -32
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_check.py -k "grouped" > $OUT/run3/pytest.txt 2>&1
echo "exit $?" >> $OUT/run3/pytest.txt; tail -3 $OUT/run3/pytest.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; git log --oneline | head -1
