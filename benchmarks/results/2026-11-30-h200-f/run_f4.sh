#!/bin/bash
# H200 run 4 of 2026-11-30-h200-f: the quantizer and recipe tests on the branch with the weight
# pair on bytewise codes (two pytest processes sharing the GPU), the probe of the second copy,
# the quantizers of main (.snap/main) and the branch alternating, whole steps of both trees.
export PYTHONUNBUFFERED=1 TILEFUSE_CACHE_DIR=$PWD/.tfcache
NEW=$PWD/src OLD=$PWD/.snap/main/src
PYTHONPATH=$NEW timeout 240 python3 -m pytest -q -p no:cacheprovider -rfs tests/test_quant_kernels.py tests/test_quant_api.py \
  > $OUT/pytest-quant.txt 2>&1 &
PYTHONPATH=$NEW timeout 240 python3 -m pytest -q -p no:cacheprovider -rfs tests/test_grouped_mlp_recipes.py \
  > $OUT/pytest-recipes.txt 2>&1 &
wait
for f in $OUT/pytest-*.txt; do echo "== $f"; grep -E "^(FAILED|ERROR)" $f | head; tail -1 $f; done
PYTHONPATH=$NEW:tests timeout 60 python3 "$(dirname "$0")"/quant_second_probe.py /tmp 2>&1 | grep -c " 0 of" | sed 's/^/probe comparisons with no difference (of 24): /'
bash "$(dirname "$0")"/quant_by_tree.sh $OUT/quant.txt OLD=$OLD NEW=$NEW
grep -v "^torch" $OUT/quant.txt
bash "$(dirname "$0")"/../2026-11-30-h200-e/steps_by_tree.sh $OUT/steps.txt OLD=$OLD NEW=$NEW > /dev/null
grep -E "^== tree|^E |fp8_block|^  bf16" $OUT/steps.txt
