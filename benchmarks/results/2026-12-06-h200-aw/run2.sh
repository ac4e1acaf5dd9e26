#!/bin/bash
# Run 2 (GPU, any Hopper card): `tilefuse check --quick` alone with a whole call (-av run 2 gave
# it 178 s, not enough for a verdict): every op verified with NaN-poisoned allocations, then the
# quick benchmarks; a failed tilefuse row fails it (exit 1). Times its phases from the log.
#   OUT=... bash benchmarks/results/2026-12-06-h200-aw/run2.sh [LIMIT_S]
set -u
cd "$(dirname "$0")/../../.."
mkdir -p $OUT/run2
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-aw2
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/run2/gpu.txt
timeout ${1:-570} python3 -m tilefuse.cli check --quick --out $OUT/run2/check 2>&1 \
    | while IFS= read -r line; do echo "[${SECONDS}s] $line"; done > $OUT/run2/check.txt
echo "check exit ${PIPESTATUS[0]} at ${SECONDS}s" >> $OUT/run2/check.txt
tail -45 $OUT/run2/check.txt
