#!/bin/bash
# Run 5 (GPU only): run5_wgrad_epilogue.py: ws_wgrad with its tile stored by TMA from shared memory
# or by pointers, checked against _grouped_mm and timed beside it; then tests/test_grouped_ws_wgrad.py.
#   OUT=... bash benchmarks/results/2026-12-03-h200-aa/run5.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-aa5
mkdir -p $OUT/run5
timeout 400 python3 benchmarks/results/2026-12-03-h200-aa/run5_wgrad_epilogue.py > $OUT/run5/wgrad-epilogue.txt 2>&1
echo "exit $?" >> $OUT/run5/wgrad-epilogue.txt
grep -v Warn $OUT/run5/wgrad-epilogue.txt
timeout 150 python3 -m pytest -q -x -p no:cacheprovider tests/test_grouped_ws_wgrad.py > $OUT/run5/pytest.txt 2>&1
echo "exit $?" >> $OUT/run5/pytest.txt; tail -3 $OUT/run5/pytest.txt
