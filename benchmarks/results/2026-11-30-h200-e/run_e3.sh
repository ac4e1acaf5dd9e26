#!/bin/bash
# H200 run 3 of 2026-11-30-h200-e: whole steps (bf16 vs fp8_block) of this tree (the dGLU
# epilogue copies dz) and of the tree before it (.snap/old = git archive 1a820f6), interleaved
# per shape; the dGLU launch at several tilings with and without the epilogue's dz copy.
export PYTHONUNBUFFERED=1 TILEFUSE_CACHE_DIR=$PWD/.tfcache
NEW=$PWD/src OLD=$PWD/.snap/old/src
bash "$(dirname "$0")"/steps_by_tree.sh $OUT/steps.txt OLD=$OLD NEW=$NEW
PYTHONPATH=$NEW:$PWD/benchmarks timeout 150 python3 "$(dirname "$0")"/grouped_dglu_configs.py 2>&1 | tee $OUT/dglu-configs.txt
