#!/bin/bash
# Run 4 (GPU, H100; ran inline from the device tool's command line, recorded here): so2_mixing_stack's
# keys of the issue's second shape, and (2, 64)'s exact key again (run 3's was cut by its 110 s
# timeout), through -ak's run3.sh. The machine was still warm: -ak's cache folder (.tfcache-ak3)
# held run 3's entries, so this export holds both runs' keys.
#   OUT=... bash benchmarks/results/2026-12-05-h200-ar/run4.sh
set -u
cd "$(dirname "$0")/../../.."
OUT=$OUT bash benchmarks/results/2026-12-05-h200-ak/run3.sh 6x32:bwd:130 6x32:fwd:70 6x32:level3:130 2x64:bwd:220
echo "done at ${SECONDS}s"
