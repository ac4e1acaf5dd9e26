#!/bin/bash
# Run 7 (GPU; prepared, not run in the stop that wrote it): issue 16's "never below 1.0x at any
# swept key" measured directly: the op as called against `_grouped_mm` + torch.compile at the
# GeGLU keys of the tuning grid (the spec's three shapes x interleave 32 / halves x bias off /
# on: 12 keys; the SwiGLU keys without bias are run 4's, with bias run 8's). About 35 s a key,
# most of it inductor.
#   OUT=... bash benchmarks/results/2026-12-04-h200-ae/run7.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d)
mkdir -p $OUT/run7
timeout 560 python3 benchmarks/grouped_compose_gpu_check.py --interleaves 32,none --activations geglu --bias off,on \
  --providers "compiled composition,tilefuse" --rounds 5 --profile none > $OUT/run7/check.txt 2>&1
echo "exit $?" >> $OUT/run7/check.txt; grep -E "^shape|tilefuse  |compiled comp|FAIL|exit" $OUT/run7/check.txt | cut -c1-150
