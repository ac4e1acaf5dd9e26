#!/bin/bash
# H200 run 3 of 2026-11-30-h200-e: whole steps (bf16 vs fp8_block) of this tree (the dGLU
# epilogue copies dz) and of the tree before it (.snap/old = git archive 1a820f6), interleaved
# per shape; the dGLU launch at several tilings with and without the epilogue's dz copy.
export PYTHONUNBUFFERED=1 TILEFUSE_CACHE_DIR=$PWD/.tfcache
NEW=$PWD/src OLD=$PWD/.snap/old/src
for s in 1 2 3; do
  for t in OLD NEW; do
    echo "== tree $t" | tee -a $OUT/steps.txt
    PYTHONPATH=${!t} timeout 60 python3 benchmarks/grouped_profile_fp8.py --steps-only --shapes $s --providers bf16,fp8_block 2>&1 | grep -v "^torch" | tee -a $OUT/steps.txt
  done
done
PYTHONPATH=$NEW:$PWD/benchmarks timeout 150 python3 benchmarks/grouped_dglu_configs.py 2>&1 | tee $OUT/dglu-configs.txt
