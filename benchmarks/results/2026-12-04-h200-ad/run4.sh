#!/bin/bash
# Run 4 (GPU only): the op as users call it on the final tree (backward plans, one descriptor
# launch path): benchmarks/grouped_compose_gpu_check.py (float64 check at a small shape, then
# forward + backward under graph replay against torch._grouped_mm + torch.compile at the
# spec's three shapes, interleave 32 and None, and fp8_block).
#   OUT=... bash benchmarks/results/2026-12-04-h200-ad/run4.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-ad
mkdir -p $OUT/run4
timeout 400 python3 benchmarks/grouped_compose_gpu_check.py --interleaves 32,none --rounds 5 > $OUT/run4/check.txt 2>&1
echo "exit $?" >> $OUT/run4/check.txt
grep "^shape\|compiled\|tilefuse  \|compose  \|fp8\|FAIL\|exit" $OUT/run4/check.txt | grep -v "^ *[0-9.]* ms  *[0-9.]*x"
