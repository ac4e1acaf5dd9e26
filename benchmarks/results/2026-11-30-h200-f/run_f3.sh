#!/bin/bash
# H200 run 3 of 2026-11-30-h200-f: the whole GPU test suite on the branch with the second-copy
# fix (as run_e6.sh: three pytest processes sharing the GPU, their timings not measurements),
# then the quantizers of main (.snap/main) and the branch at their default tiles, alternating.
export PYTHONUNBUFFERED=1
NEW=$PWD/src OLD=$PWD/.snap/main/src
run() {  # name, files...
  local name=$1; shift
  PYTHONPATH=$NEW TILEFUSE_CACHE_DIR=$PWD/.tfcache-$name timeout 480 python3 -m pytest -q -p no:cacheprovider -rfs "$@" \
    > $OUT/pytest-$name.txt 2>&1
  echo "exit $?" >> $OUT/pytest-$name.txt
}
run grouped tests/test_grouped_mlp_recipes.py tests/test_grouped_mlp_kernels.py tests/test_grouped_mlp_api.py tests/test_grouped_mlp_reference.py &
run quant-so2 tests/test_quant_kernels.py tests/test_quant_api.py tests/test_quant_reference.py tests/test_so2_kernels.py tests/test_so2_api.py tests/test_so2_reference.py &
run dyt-check-tuning tests/test_dyt.py tests/test_dyt_api.py tests/test_check.py tests/test_tuning_dyt.py tests/test_tuning_gpu.py tests/test_tuning_sweep.py tests/test_tuning_table.py &
wait
for f in $OUT/pytest-*.txt; do echo "== $f"; grep -E "^(FAILED|ERROR)" $f | head -20; tail -2 $f; done
bash "$(dirname "$0")"/quant_by_tree.sh $OUT/quant.txt OLD=$OLD NEW=$NEW
cat $OUT/quant.txt
