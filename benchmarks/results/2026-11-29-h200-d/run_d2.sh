#!/bin/bash
# H200 run 2 of 2026-11-29-h200-d: whole steps (bf16 vs fp8_block) of this tree and of the tree
# before this session's fp8 changes (.snap/old = git archive 6ee9df7), interleaved per shape;
# quantizer tiles and wgrad orders; the fp8 profile at shape 2.
export PYTHONUNBUFFERED=1 TILEFUSE_CACHE_DIR=$PWD/.tfcache
NEW=$PWD/src OLD=$PWD/.snap/old/src
for s in 1 2 3; do
  PYTHONPATH=$NEW timeout 100 python3 benchmarks/grouped_profile_fp8.py --steps-only --shapes $s --providers bf16,fp8_block 2>&1 | tee -a $OUT/steps-new.txt
  PYTHONPATH=$OLD timeout 100 python3 benchmarks/grouped_profile_fp8.py --steps-only --shapes $s --providers bf16,fp8_block 2>&1 | tee -a $OUT/steps-old.txt
done
PYTHONPATH=$NEW:$PWD/benchmarks timeout 150 python3 benchmarks/grouped_fp8_variants.py 2>&1 | tee $OUT/variants.txt
PYTHONPATH=$NEW timeout 120 python3 benchmarks/grouped_profile_fp8.py --shapes 2 2>&1 | tee $OUT/fp8-profile-2.txt
