#!/bin/bash
# Run 1 (GPU, the H100; carry .whl): -aw's run 6 (the (6, 96) forward key swept with the
# forward's composition route among its candidates, then so2_peers.py at (65536, 6, 96) against
# torch.compile; its output goes to $OUT/run6), then the (6, 128) forward key the same way
# (-ak's run3.sh; $OUT/run3). Run from a `git archive` extraction of the tree with .whl beside it:
#   OUT=... bash benchmarks/results/2026-12-06-h200-ax/run1.sh
set -u
cd "$(dirname "$0")/../../.."
OUT=$OUT bash benchmarks/results/2026-12-06-h200-aw/run6.sh
echo "=== ak run3 at ${SECONDS}s"
OUT=$OUT PYTHONPATH=$PWD/src timeout $((590 - SECONDS)) bash benchmarks/results/2026-12-05-h200-ak/run3.sh 6x128:fwd:250
echo "done ${SECONDS}s"
