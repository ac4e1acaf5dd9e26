#!/bin/bash
# Run 2 (GPU, the H100): the (6, 96) and (6, 128) backward keys swept again (the composition
# route's in-place layer GEMMs since dbdb5a9), by -ak's run3.sh; output in $OUT/run3.
#   OUT=... bash benchmarks/results/2026-12-06-h200-ax/run2.sh
set -u
cd "$(dirname "$0")/../../.."
OUT=$OUT PYTHONPATH=$PWD/src bash benchmarks/results/2026-12-05-h200-ak/run3.sh 6x96:bwd:200 6x128:bwd:330
echo "done ${SECONDS}s"
