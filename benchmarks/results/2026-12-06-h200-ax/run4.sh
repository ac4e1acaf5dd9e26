#!/bin/bash
# Run 4 (GPU, the H200 of run 3, warm): the H200 table's missing level-3 keys, by -ak's
# run3.sh (output in $OUT/run3; kept here as run4/).
#   OUT=... bash benchmarks/results/2026-12-06-h200-ax/run4.sh
set -u
cd "$(dirname "$0")/../../.."
OUT=$OUT PYTHONPATH=$PWD/src timeout 540 bash benchmarks/results/2026-12-05-h200-ak/run3.sh \
  6x96:level3:150 6x128:level3:180 2x32:level3:60 1x32:level3:90 3x64:level3:150
echo "done ${SECONDS}s"
