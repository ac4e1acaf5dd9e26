#!/bin/bash
# Run 5 (GPU, H100; ran inline from the device tool's command line, recorded here): so2_mixing_stack's
# (1, 32) and (2, 32) exact and forward keys, through -ak's run3.sh, with the device time left.
#   OUT=... bash benchmarks/results/2026-12-05-h200-ar/run5.sh
set -u
cd "$(dirname "$0")/../../.."
OUT=$OUT bash benchmarks/results/2026-12-05-h200-ak/run3.sh 1x32:bwd:90 1x32:fwd:45 2x32:bwd:90 2x32:fwd:45
echo "done at ${SECONDS}s"
