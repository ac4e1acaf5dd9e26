#!/bin/bash
# Run 3 (GPU; the command as it ran, inline, after run 2): -ao's run1.sh again (its run 2) and
# wtile.py again, in fresh processes. Called with kind nvidia-h200; it ran on the H100 held.
#   OUT=... bash benchmarks/results/2026-12-05-h200-aq/run3.sh
set -u
cd "$(dirname "$0")/../../.."
mkdir -p $OUT/ao $OUT/wt
OUT=$OUT/ao bash benchmarks/results/2026-12-05-h200-ao/run1.sh > /dev/null 2>&1
grep -E "^shape|W 128x128 pair" $OUT/ao/run1/tiles.txt | cut -c1-120
export PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/wt/gpu.txt
timeout 200 python3 benchmarks/results/2026-12-05-h200-aq/wtile.py --json $OUT/wt/wtile.jsonl > $OUT/wt/wtile.txt 2>&1
echo "exit $? at ${SECONDS}s" >> $OUT/wt/wtile.txt
cat $OUT/wt/wtile.txt
