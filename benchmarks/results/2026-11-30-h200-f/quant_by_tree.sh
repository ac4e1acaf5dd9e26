#!/bin/bash
# The fp8 quantizers at their default tiles (grouped_fp8_variants.py --quantizers-only
# --default-tiles) of several source trees, the trees alternating for two rounds, appended to
# a file:
#   bash benchmarks/results/2026-11-30-h200-f/quant_by_tree.sh OUTFILE NAME=SRC_DIR [NAME=SRC_DIR ...]
# from the root of a tree whose benchmarks/ holds grouped_profile_fp8.py (commits 9519587 to 19941c5).
out=$1; shift
for round in 1 2; do
  for tree in "$@"; do
    echo "== round $round tree ${tree%%=*}" >> "$out"
    PYTHONPATH=${tree#*=}:benchmarks timeout 60 python3 "$(dirname "$0")"/grouped_fp8_variants.py --quantizers-only \
      --default-tiles >> "$out" 2>&1
  done
done
