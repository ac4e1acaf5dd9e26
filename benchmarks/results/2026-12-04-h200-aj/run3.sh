#!/bin/bash
# Run 3 (GPU): where fp8_block's step time goes now (the ws GLU, chunk pairs and this folder's
# table): torch.profiler kernel times per forward + backward of fp8_block and bf16 tilefuse at
# the spec's three shapes (balanced counts, interleave 32), benchmarks/grouped_compose_gpu_check.py
# --shapes none (profiles only).
#   OUT=... bash benchmarks/results/2026-12-04-h200-aj/run3.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d)
mkdir -p $OUT/run3
timeout 300 python3 benchmarks/grouped_compose_gpu_check.py --shapes none --interleaves 32 \
  --profile "tilefuse,fp8_block" --profile-shapes 1,2,3 > $OUT/run3/profile.txt 2>&1
echo "exit $?" >> $OUT/run3/profile.txt
grep -E "^profile|^ +[0-9.]+ ms" $OUT/run3/profile.txt | cut -c1-120
