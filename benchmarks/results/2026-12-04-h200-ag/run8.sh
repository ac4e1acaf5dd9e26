#!/bin/bash
# Run 8 (GPU; prepared, not run): host_streams.py, the second stream's host cost per forward +
# backward call beside one stream and a bare composition. About 1 minute.
#   OUT=... bash benchmarks/results/2026-12-04-h200-ag/run8.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d)
mkdir -p $OUT/run8
timeout 240 python3 benchmarks/results/2026-12-04-h200-ag/host_streams.py > $OUT/run8/host.txt 2>&1
echo "exit $?" >> $OUT/run8/host.txt
cat $OUT/run8/host.txt
