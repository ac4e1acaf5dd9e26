#!/bin/bash
# Run 6 (GPU; prepared, not run: the session's device time was spent): host_fork_variants.py,
# whether reused events and a plain set_stream make the second stream's fork and join cheaper
# on the host (run 2: 60-80 us a fork, 19 us a join). About 1.5 minutes.
#   OUT=... bash benchmarks/results/2026-12-04-h200-ah/run6.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d)
mkdir -p $OUT/run6
timeout 300 python3 benchmarks/results/2026-12-04-h200-ah/host_fork_variants.py > $OUT/run6/host.txt 2>&1
echo "exit $?" >> $OUT/run6/host.txt
cat $OUT/run6/host.txt
