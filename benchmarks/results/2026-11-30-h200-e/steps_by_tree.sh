#!/bin/bash
# Whole steps (bf16 vs fp8_block, grouped_profile_fp8.py --steps-only) of several source trees,
# the trees one after the other per shape, appended to a file:
#   bash benchmarks/results/2026-11-30-h200-e/steps_by_tree.sh OUTFILE NAME=SRC_DIR [NAME=SRC_DIR ...]
# from the root of a tree whose benchmarks/ holds grouped_profile_fp8.py (commits 9519587 to 19941c5).
out=$1; shift
for s in 1 2 3; do
  for tree in "$@"; do
    echo "== tree ${tree%%=*}" | tee -a "$out"
    PYTHONPATH=${tree#*=} timeout 60 python3 benchmarks/grouped_profile_fp8.py --steps-only --shapes $s \
      --providers bf16,fp8_block 2>&1 | grep -v "^torch" | tee -a "$out"
  done
done
