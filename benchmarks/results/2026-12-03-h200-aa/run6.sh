#!/bin/bash
# Run 6 (GPU only): as run 4, on ws_wgrad with its TMA-store epilogue (the only one since run 5):
# the ws_wgrad GPU tests; the bf16 sweep of the spec's three keys with the compose candidates,
# exported; the op as users call it on the swept table (grouped_compose_gpu_check).
#   OUT=... bash benchmarks/results/2026-12-03-h200-aa/run6.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-aa6
mkdir -p $OUT/run6
timeout 150 python3 -m pytest -q -x -p no:cacheprovider tests/test_grouped_ws_wgrad.py > $OUT/run6/pytest.txt 2>&1
echo "exit $?" >> $OUT/run6/pytest.txt; tail -3 $OUT/run6/pytest.txt
timeout 240 python3 -m tilefuse.cli tune --op grouped_glu_mlp --dtype bf16 --shape 64x32768x2048x1408 \
  --shape 128x65536x2048x768 --shape 8x16384x4096x3584 --force --rounds 6 --no-progress > $OUT/run6/tune-bf16.txt 2>&1
echo "tune exit $?" >> $OUT/run6/tune-bf16.txt
python3 -m tilefuse.cli tune --export-builtin $OUT/run6 >> $OUT/run6/tune-bf16.txt 2>&1
grep -v Warn $OUT/run6/tune-bf16.txt | grep -v "^timed" | tail -40
timeout 240 python3 benchmarks/grouped_compose_gpu_check.py --interleaves 32 --rounds 5 > $OUT/run6/check.txt 2>&1
echo "exit $?" >> $OUT/run6/check.txt
grep -v "^ *[0-9.]* ms  *[0-9.]*x\|Warn" $OUT/run6/check.txt | tail -32
