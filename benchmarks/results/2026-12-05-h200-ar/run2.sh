#!/bin/bash
# Run 2 (GPU; prepared; for an H100 80GB HBM3): the 11 dyt keys of the standard grid that the
# shipped H100 table lacks (-aq run 4 was cut by its timeouts): `tilefuse tune --all-defaults
# --op dyt` skips the keys the built-in table covers; the export merges them into it. A key cut
# short by the timeout is not recorded: call again (the cache folder persists on a warm machine).
#   OUT=... bash benchmarks/results/2026-12-05-h200-ar/run2.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-ar
mkdir -p $OUT/run2 $TILEFUSE_CACHE_DIR
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run2/gpu.txt
timeout 500 python3 -m tilefuse.cli tune --all-defaults --op dyt --no-progress >> $OUT/run2/tune.txt 2>&1
echo "tune exit $? at ${SECONDS}s" >> $OUT/run2/tune.txt
python3 -m tilefuse.cli tune --export-builtin $OUT/run2 >> $OUT/run2/tune.txt 2>&1
grep -E "^swept|exit|wrote" $OUT/run2/tune.txt | cut -c1-160
