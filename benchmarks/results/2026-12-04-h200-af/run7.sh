#!/bin/bash
# Run 7 (GPU): tilefuse check's whole so2_mixing_stack verification (not --quick: every shape,
# the fused-vs-relay rows at Cf 32 and 64 over lmax 1-6) on the H200's built-in table, after
# the check's fix (ad00c08).
#   OUT=... bash benchmarks/results/2026-12-04-h200-af/run7.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d)
mkdir -p $OUT/run7
timeout 220 python3 -m tilefuse.cli check --no-bench --no-progress --ops so2_mixing_stack --out $OUT/run7/report \
  > $OUT/run7/check.txt 2>&1
echo "exit $?" >> $OUT/run7/check.txt
cat $OUT/run7/check.txt | cut -c1-300 | head -40
