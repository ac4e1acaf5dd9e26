#!/bin/bash
# Run 5 (GPU): the final tree's GPU-facing changes since run 1: the so2 wgmma compile test
# (cc5cfb1's kernel again, with the K-loop spill check) under both ptxas, beside
# `tilefuse check --quick --no-bench` (its report's ptxas line).
#   OUT=... bash benchmarks/results/2026-12-04-h200-ah/run5.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
mkdir -p $OUT/run5
TILEFUSE_CACHE_DIR=$(mktemp -d) timeout 150 python3 -m pytest -q -p no:cacheprovider -rfs --tb=short \
  tests/test_so2_wgmma.py -k "compiles_for_sm90" > $OUT/run5/pytest-wgmma-compile.txt 2>&1 &
TILEFUSE_CACHE_DIR=$(mktemp -d) timeout 150 python3 -m tilefuse.cli check --quick --no-bench --no-progress \
  --out $OUT/run5/report > $OUT/run5/check.txt 2>&1 &
wait
tail -3 $OUT/run5/pytest-wgmma-compile.txt; cat $OUT/run5/check.txt | tail -8
grep -n "ptxas" $OUT/run5/report/report.md | head -3
rm -f $OUT/run5/report/*.png
