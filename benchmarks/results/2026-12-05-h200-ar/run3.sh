#!/bin/bash
# Run 3 (GPU, H100; ran inline from the device tool's command line, recorded here): so2_mixing_stack's
# exact, forward and level-3 keys of the issue's first shape, and (2, 64)'s exact and forward keys,
# through -ak's run3.sh (each key's sweep under its timeout, the table exported after each).
#   OUT=... bash benchmarks/results/2026-12-05-h200-ar/run3.sh
set -u
cd "$(dirname "$0")/../../.."
OUT=$OUT bash benchmarks/results/2026-12-05-h200-ak/run3.sh 3x32:bwd:120 3x32:fwd:100 3x32:level3:130 \
  2x64:bwd:110 2x64:fwd:100
echo "done at ${SECONDS}s"
