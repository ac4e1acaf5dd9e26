#!/bin/bash
# Run 3 (GPU only): where the op's host time per forward call goes (run3_hostprof.py).
#   OUT=... bash benchmarks/results/2026-12-03-h200-ac/run3.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-ac
R=benchmarks/results/2026-12-03-h200-ac
mkdir -p $OUT/run3
timeout 240 python3 $R/run3_hostprof.py > $OUT/run3/hostprof.txt 2>&1
echo "exit $?" >> $OUT/run3/hostprof.txt
grep -A20 "^| layer" $OUT/run3/hostprof.txt; grep -A14 "ncalls" $OUT/run3/hostprof.txt | cut -c1-150 | head -50; tail -3 $OUT/run3/hostprof.txt
