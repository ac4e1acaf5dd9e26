#!/bin/bash
# Run 6 (GPU, either card): varying_t.py: grouped_glu_mlp's host time per call with a new token
# count every call, plans with and without compiled kernels shared across launchers (3d86d5c),
# and plans off.
#   OUT=... bash benchmarks/results/2026-12-06-h200-ay/run6.sh
set -u
cd "$(dirname "$0")/../../.."
mkdir -p $OUT/run6
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d)
timeout 400 python3 benchmarks/results/2026-12-06-h200-ay/varying_t.py --calls 200 > $OUT/run6/varying_t.txt 2>&1
echo "exit $? at ${SECONDS}s" >> $OUT/run6/varying_t.txt
cat $OUT/run6/varying_t.txt | tail -12
