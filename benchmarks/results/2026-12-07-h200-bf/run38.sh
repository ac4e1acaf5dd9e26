#!/bin/bash
# Run 38 (GPU, either card; carry .whl): run 3's command again on the tree this stop closes on
# (run 37's code; since then only docstrings and the ws dGLU's scale helpers' home moved): the
# issues' tables, so2_mixing_stack against DeePMD-kit 3.2.0 (fp32, fp16x3) and torch.compile,
# then issue 16's step table. The targets are the H200's; the card is recorded. Its output is
# run 3's, moved to $OUT/run38.
#   OUT=... bash benchmarks/results/2026-12-07-h200-bf/run38.sh
set -u
tmp=$(mktemp -d)
OUT=$tmp bash "$(dirname "$0")/run3.sh"
mv $tmp/run3 $OUT/run38
