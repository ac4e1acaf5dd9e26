#!/bin/bash
# Run 4 (GPU; the commands as they ran, inline, after run 3, as two calls on the warm H100 with
# the cache kept between them): dyt's standard grid swept into .tfcache-dyt, each call cut by
# its timeout (480 s, then 190 s; a key cut short is not recorded), the table exported after each.
#   OUT=... bash benchmarks/results/2026-12-05-h200-aq/run4.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-dyt
mkdir -p $OUT/dyt $OUT/dyt2 $TILEFUSE_CACHE_DIR
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/dyt/gpu.txt
timeout 480 python3 -m tilefuse.cli tune --all-defaults --op dyt --no-progress > $OUT/dyt/tune.txt 2>&1
echo "tune exit $? at ${SECONDS}s" >> $OUT/dyt/tune.txt
python3 -m tilefuse.cli tune --export-builtin $OUT/dyt >> $OUT/dyt/tune.txt 2>&1
# the second call
timeout 190 python3 -m tilefuse.cli tune --all-defaults --op dyt --no-progress > $OUT/dyt2/tune.txt 2>&1
echo "tune exit $? at ${SECONDS}s" >> $OUT/dyt2/tune.txt
python3 -m tilefuse.cli tune --export-builtin $OUT/dyt2 >> $OUT/dyt2/tune.txt 2>&1
