#!/bin/bash
# Run 5 (tree as committed with this script): the grouped sweep of the spec's three bf16 keys
# (swiglu, interleave 32, no bias) with the TMA candidates, exported as a built-in table; then
# grouped_compose_gpu_check.py (interleave 32): the whole op against the compiled composition,
# with the fused kernels at their heuristic tiles and fp8_block beside it.
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache
timeout 250 python3 -m tilefuse.cli tune --op grouped_glu_mlp --dtype bf16 --shape 8x16384x4096x3584 \
  --shape 64x32768x2048x1408 --shape 128x65536x2048x768 --force --rounds 6 --no-progress > $OUT/tune-grouped.txt 2>&1
echo "tune exit $?" >> $OUT/tune-grouped.txt
python3 -m tilefuse.cli tune --export-builtin $OUT >> $OUT/tune-grouped.txt 2>&1
tail -20 $OUT/tune-grouped.txt
timeout 290 python3 benchmarks/grouped_compose_gpu_check.py --interleaves 32 > $OUT/grouped_check.txt 2>&1
echo "check exit $?" >> $OUT/grouped_check.txt
grep -v "^  PASS" $OUT/grouped_check.txt | tail -40
