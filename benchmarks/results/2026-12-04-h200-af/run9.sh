#!/bin/bash
# Run 9 (GPU; prepared, not run): tilefuse check's whole verification of every op (not --quick,
# no benchmarks) on the built-in H200 table: run 7 covered so2_mixing_stack only; dyt and
# grouped_glu_mlp ran only --quick's shapes this stop (run 4's test_check_quick_writes_report).
#   OUT=... bash benchmarks/results/2026-12-04-h200-af/run9.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d)
mkdir -p $OUT/run9
timeout 500 python3 -m tilefuse.cli check --no-bench --no-progress --out $OUT/run9/report > $OUT/run9/check.txt 2>&1
echo "exit $?" >> $OUT/run9/check.txt
grep -E "FAIL|verification|exit|report" $OUT/run9/check.txt | cut -c1-300 | head -40
