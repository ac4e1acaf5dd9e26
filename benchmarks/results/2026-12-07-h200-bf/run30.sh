#!/bin/bash
# Run 30 (GPU, either card; carry .whl): run 3's command again on this tree, the issues' tables
# after the kernel changes since run 3's tree (the ws fp8 GLU / dGLU in the halves layout, the
# dGLU's half-tile z loads, the H200 table's halves keys): so2_mixing_stack against DeePMD-kit
# 3.2.0 (fp32, fp16x3) and torch.compile, then issue 16's step table. Its output is run 3's,
# moved to $OUT/run30.
#   OUT=... bash benchmarks/results/2026-12-07-h200-bf/run30.sh
set -u
tmp=$(mktemp -d)
OUT=$tmp bash "$(dirname "$0")/run3.sh"
mv $tmp/run3 $OUT/run30
