#!/bin/bash
# Run 6 (GPU, H100; ran inline from the device tool's command line, recorded here): so2_mixing_stack's
# (3, 64) forward and exact keys, through -ak's run3.sh, in the last three minutes of device time
# (the exact key ran past its 120 s timeout: not recorded).
#   OUT=... bash benchmarks/results/2026-12-05-h200-ar/run6.sh
set -u
cd "$(dirname "$0")/../../.."
OUT=$OUT bash benchmarks/results/2026-12-05-h200-ak/run3.sh 3x64:fwd:40 3x64:bwd:120
echo "done at ${SECONDS}s"
