#!/bin/bash
# Run 6 (GPU, prepared; any Hopper card): `tilefuse check --quick` alone, with the call's whole
# limit (run 2 gave it 178 s, not enough for a verdict): every op verified with NaN-poisoned
# allocations, the quick benchmarks; a failed tilefuse row fails it (exit 1).
#   OUT=... bash benchmarks/results/2026-12-05-h200-av/run6.sh
set -u
cd "$(dirname "$0")/../../.."
mkdir -p $OUT/run6
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH} TILEFUSE_CACHE_DIR=$PWD/.tfcache-av6
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/run6/gpu.txt
timeout 570 python3 -m tilefuse.cli check --quick --no-progress --out $OUT/run6/check > $OUT/run6/check.txt 2>&1
echo "check exit $? at ${SECONDS}s" >> $OUT/run6/check.txt
tail -40 $OUT/run6/check.txt
