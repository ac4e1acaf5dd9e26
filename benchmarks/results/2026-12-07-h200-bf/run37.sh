#!/bin/bash
# Run 37 (GPU, either card; carry .whl): run 3's command again, on the tree this session lands
# (the ws dGLU's whole-tile z since run 30's tree; the Gluon quantizer gone, which the op never
# ran by default): the issues' tables, so2_mixing_stack against DeePMD-kit 3.2.0 (fp32, fp16x3)
# and torch.compile, then issue 16's step table. Its output is run 3's, moved to $OUT/run37.
#   OUT=... bash benchmarks/results/2026-12-07-h200-bf/run37.sh
set -u
tmp=$(mktemp -d)
OUT=$tmp bash "$(dirname "$0")/run3.sh"
mv $tmp/run3 $OUT/run37
