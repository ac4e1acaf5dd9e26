#!/bin/bash
# H200 run 1 of 2026-11-30-h200-f: the fp8 quantizer instruction cuts (branch wip/fp8-quant-alu)
# against main (.snap/main = git archive 869b353 src): bitwise parity of the compiled kernels
# (the hardware conversion's NaN and saturation), the sm_90 compile tests under the image's
# triton, then the quantizers' bandwidth, the two trees alternating, and the new tree's tiles.
export PYTHONUNBUFFERED=1 TILEFUSE_CACHE_DIR=$PWD/.tfcache
NEW=$PWD/src OLD=$PWD/.snap/main/src
PYTHONPATH=$NEW timeout 240 python3 -m pytest -q -p no:cacheprovider -rfs tests/test_quant_kernels.py \
  tests/test_quant_api.py tests/test_grouped_mlp_recipes.py 2>&1 | tail -15 | tee $OUT/pytest-quant.txt
PYTHONPATH=$NEW timeout 120 python3 -m pytest -q -p no:cacheprovider -rfs tests/test_grouped_mlp_kernels.py \
  -k sm90 2>&1 | tail -5 | tee $OUT/pytest-sm90.txt
bash "$(dirname "$0")"/quant_by_tree.sh $OUT/quant.txt OLD=$OLD NEW=$NEW
cat $OUT/quant.txt
PYTHONPATH=$NEW:benchmarks timeout 120 python3 "$(dirname "$0")"/grouped_fp8_variants.py --quantizers-only 2>&1 \
  | tee $OUT/quant-tiles.txt
