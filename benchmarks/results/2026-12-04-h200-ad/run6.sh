#!/bin/bash
# Run 6 (GPU only): run 5's timing again with run6_halves.py (each step synchronised and checked
# eagerly first, each provider's exception printed, eager timing where graph capture fails):
# fc1's GLU epilogue in the halves layout on against off, the op as called.
#   OUT=... bash benchmarks/results/2026-12-04-h200-ad/run6.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-ad
R=benchmarks/results/2026-12-04-h200-ad
mkdir -p $OUT/run6
timeout 190 python3 $R/run6_halves.py > $OUT/run6/halves.txt 2>&1
echo "exit $?" >> $OUT/run6/halves.txt; grep -v "Warn\|return Variable\|AccumulateGrad" $OUT/run6/halves.txt | tail -14
