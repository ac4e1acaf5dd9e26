#!/bin/bash
# H200 run 7 of 2026-11-30-h200-e: the two tests changed after run 6; whole steps (bf16 vs
# fp8_block) of the final tree and of the session's starting tree (.snap/start = git archive
# df06673 src), interleaved per shape; every recipe's step at shape 2.
export PYTHONUNBUFFERED=1 TILEFUSE_CACHE_DIR=$PWD/.tfcache
NEW=$PWD/src START=$PWD/.snap/start/src
PYTHONPATH=$NEW timeout 90 python3 -m pytest -q -p no:cacheprovider -rfs tests/test_grouped_mlp_recipes.py tests/test_grouped_mlp_kernels.py \
  -k "matches_the_quantizer_path or sm90" 2>&1 | tail -3 | tee $OUT/pytest.txt
bash "$(dirname "$0")"/steps_by_tree.sh $OUT/steps.txt START=$START NEW=$NEW
PYTHONPATH=$NEW timeout 90 python3 benchmarks/grouped_profile_fp8.py --steps-only --shapes 2 2>&1 | tee $OUT/steps-all-recipes-2.txt
