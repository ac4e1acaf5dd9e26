#!/bin/bash
# Run 3 (GPU, an H200: needs_h200, its sweeps at lmax 6 size their problems to the card's
# 141 GB): the H200 table's missing exact lmax-6 keys, backward and forward, by -ak's run3.sh
# (output in $OUT/run3).
#   OUT=... bash benchmarks/results/2026-12-06-h200-ax/run3.sh
set -u
cd "$(dirname "$0")/../../.."
OUT=$OUT PYTHONPATH=$PWD/src bash benchmarks/results/2026-12-05-h200-ak/run3.sh 6x96:bwd:150 6x128:bwd:200 6x96:fwd:110 6x128:fwd:110
echo "done ${SECONDS}s"
