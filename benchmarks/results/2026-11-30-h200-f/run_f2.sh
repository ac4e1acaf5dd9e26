#!/bin/bash
# H200 run 2 of 2026-11-30-h200-f: where the second (transposed) copy of the weight pair differs
# (run 1: its tests failed on the GPU only), the failing tests in full, the quantizer tiles
# again (run 1's tile sweep and default-tile runs disagreed on the row copy's 32x128 tile), and
# whole steps of main (.snap/main) and the branch, interleaved per shape.
export PYTHONUNBUFFERED=1 TILEFUSE_CACHE_DIR=$PWD/.tfcache
NEW=$PWD/src OLD=$PWD/.snap/main/src
PYTHONPATH=$NEW:tests timeout 120 python3 "$(dirname "$0")"/quant_second_probe.py $OUT 2>&1 | tee $OUT/probe.txt
PYTHONPATH=$NEW timeout 120 python3 -m pytest -q -p no:cacheprovider -x tests/test_quant_kernels.py \
  -k second_transposed_copy 2>&1 | tail -60 > $OUT/pytest-second.txt
for run in sweep default sweep; do
  flag=; [ $run = default ] && flag=--default-tiles
  echo "== $run" | tee -a $OUT/quant.txt
  PYTHONPATH=$NEW:benchmarks timeout 90 python3 "$(dirname "$0")"/grouped_fp8_variants.py --quantizers-only $flag 2>&1 \
    | tee -a $OUT/quant.txt
done
bash "$(dirname "$0")"/../2026-11-30-h200-e/steps_by_tree.sh $OUT/steps.txt OLD=$OLD NEW=$NEW
