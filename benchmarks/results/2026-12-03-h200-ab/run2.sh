#!/bin/bash
# Run 2 (GPU only): the GPU tests of ws_rows, ws_wgrad, the compose route and the check's grouped
# roles; the bf16 sweep of the spec's three keys with the compose candidates (rows tiles
# included), exported as a built-in table.
#   OUT=... bash benchmarks/results/2026-12-03-h200-ab/run2.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-ab2
mkdir -p $OUT/run2
timeout 170 python3 -m pytest -q -p no:cacheprovider tests/test_grouped_ws_rows.py tests/test_grouped_ws_wgrad.py \
  tests/test_grouped_compose.py tests/test_check.py -k "ws or wgrad or compose or grouped" > $OUT/run2/pytest.txt 2>&1
echo "exit $?" >> $OUT/run2/pytest.txt; tail -3 $OUT/run2/pytest.txt
timeout 380 python3 -m tilefuse.cli tune --op grouped_glu_mlp --dtype bf16 --shape 64x32768x2048x1408 \
  --shape 128x65536x2048x768 --shape 8x16384x4096x3584 --force --rounds 6 --no-progress > $OUT/run2/tune-bf16.txt 2>&1
echo "tune exit $?" >> $OUT/run2/tune-bf16.txt
python3 -m tilefuse.cli tune --export-builtin $OUT/run2 >> $OUT/run2/tune-bf16.txt 2>&1
grep -v Warn $OUT/run2/tune-bf16.txt | grep -v "^timed" | tail -30
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; git log --oneline | head -1
