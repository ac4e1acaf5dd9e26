#!/bin/bash
# Run 8 (GPU only; prepared, not run in the stop that wrote it): run8_ws_rows.py, the compose
# route's four row-ragged bf16 GEMMs through a warp-specialised Gluon probe kernel, checked
# against torch._grouped_mm and timed beside it at the spec's three shapes.
#   OUT=... bash benchmarks/results/2026-12-03-h200-aa/run8.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-aa8
mkdir -p $OUT/run8
timeout 400 python3 benchmarks/results/2026-12-03-h200-aa/run8_ws_rows.py > $OUT/run8/ws-rows.txt 2>&1
echo "exit $?" >> $OUT/run8/ws-rows.txt
grep -v Warn $OUT/run8/ws-rows.txt
