#!/bin/bash
# Run 8 (GPU only): the fp8_block sweep of shapes 2-3 with the coalesced ws epilogue, exported.
#   OUT=... bash benchmarks/results/2026-12-03-h200-z/run8.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-z8
mkdir -p $OUT/run8
timeout 100 python3 -m tilefuse.cli tune --op grouped_glu_mlp --dtype fp8_block --shape 64x32768x2048x1408 \
  --shape 128x65536x2048x768 --shape 8x16384x4096x3584 --force --rounds 6 --no-progress > $OUT/run8/tune-fp8.txt 2>&1
echo "tune exit $?" >> $OUT/run8/tune-fp8.txt
python3 -m tilefuse.cli tune --export-builtin $OUT/run8 >> $OUT/run8/tune-fp8.txt 2>&1
grep -v Warn $OUT/run8/tune-fp8.txt | grep -v "^timed" | tail -12
