#!/bin/bash
# Run 1 (GPU; prepared; for an H200): the fp8_block weight pair's tile there. -ao's tile sweep
# (quant_bandwidth.py --sections step --tiles) and -aq's wtile.py (the whole fp8_block step with
# the pair on 4 warps against 8), in fresh processes, the H200's built-in table in force.
#   OUT=... bash benchmarks/results/2026-12-05-h200-ar/run1.sh
set -u
cd "$(dirname "$0")/../../.."
mkdir -p $OUT/run1
OUT=$OUT/run1 bash benchmarks/results/2026-12-05-h200-ao/run1.sh > /dev/null 2>&1
mv $OUT/run1/run1/* $OUT/run1/ && rmdir $OUT/run1/run1
grep -E "^shape|W 128x128 pair" $OUT/run1/tiles.txt | cut -c1-120
export PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d)
timeout 200 python3 benchmarks/results/2026-12-05-h200-aq/wtile.py --json $OUT/run1/wtile.jsonl > $OUT/run1/wtile.txt 2>&1
echo "exit $? at ${SECONDS}s" >> $OUT/run1/wtile.txt
cat $OUT/run1/wtile.txt
