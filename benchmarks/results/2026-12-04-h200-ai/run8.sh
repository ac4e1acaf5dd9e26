#!/bin/bash
# Run 8 (GPU; ran in the next session at 0f5d096, 76 s): probe_fp8_wgrad_pairs.py,
# fp8_block's weight gradients through a warp-specialised Gluon kernel with chunk pairs
# (128 x 64 tiles: no stack; 128 x 128: a 208-byte stack) against grouped_wgrad_kernel, bits
# first, then dW1 + dW2 at the three spec shapes, balanced and routed counts. About 4 minutes.
#   OUT=... bash benchmarks/results/2026-12-04-h200-ai/run8.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d)
mkdir -p $OUT/run8
timeout 400 python3 benchmarks/results/2026-12-04-h200-ai/probe_fp8_wgrad_pairs.py --rounds 7 > $OUT/run8/wgrad.txt 2>&1
echo "exit $?" >> $OUT/run8/wgrad.txt
grep -v "^  shape .* bitwise$" $OUT/run8/wgrad.txt | tail -45
