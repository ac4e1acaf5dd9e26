#!/bin/bash
# Run 6 (GPU): sustained.py --rounds 3 --seconds 2: bf16 tilefuse and fp8_block in alternating
# 2 s blocks of back-to-back replays, three rounds, at the three spec shapes, beside the SM
# clock and power (run 5: both at the 700 W cap, fp8_block at higher clocks).
#   OUT=... bash benchmarks/results/2026-12-04-h200-aj/run6.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d)
mkdir -p $OUT/run6
timeout 220 python3 benchmarks/results/2026-12-04-h200-aj/sustained.py --shapes 1,2,3 --rounds 3 --seconds 2 \
  --log $OUT/run6/smi.csv > $OUT/run6/sustained.txt 2>&1
echo "exit $?" >> $OUT/run6/sustained.txt
grep -A30 "^summary" $OUT/run6/sustained.txt; tail -1 $OUT/run6/sustained.txt
