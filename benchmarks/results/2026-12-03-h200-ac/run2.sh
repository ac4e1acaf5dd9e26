#!/bin/bash
# Run 2 (GPU only): ws_rows' grouped tile order against the order so far and CUTLASS
# (run2_group.py: bits on small problems, the four GEMMs timed at the spec's shapes); the host
# time per call of the op as called against the plain composition (run2_host.py).
#   OUT=... bash benchmarks/results/2026-12-03-h200-ac/run2.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-ac
R=benchmarks/results/2026-12-03-h200-ac
mkdir -p $OUT/run2
timeout 300 python3 $R/run2_group.py --rounds 7 > $OUT/run2/group.txt 2>&1
echo "exit $?" >> $OUT/run2/group.txt
grep -E "small|four GEMMs|DIFFERS|False|FAILED|Error|exit" $OUT/run2/group.txt | head -40
timeout 200 python3 $R/run2_host.py > $OUT/run2/host.txt 2>&1
echo "exit $?" >> $OUT/run2/host.txt; grep -v Warn $OUT/run2/host.txt | tail -12
