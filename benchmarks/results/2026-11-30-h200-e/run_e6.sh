#!/bin/bash
# H200 run 6 of 2026-11-30-h200-e: the whole GPU test suite on this tree, in three pytest
# processes sharing the GPU (their timings are not measurements).
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
run() {  # name, files...
  local name=$1; shift
  TILEFUSE_CACHE_DIR=$PWD/.tfcache-$name timeout 540 python3 -m pytest -q -p no:cacheprovider -rfs "$@" > $OUT/pytest-$name.txt 2>&1
  echo "exit $?" >> $OUT/pytest-$name.txt
}
run grouped tests/test_grouped_mlp_recipes.py tests/test_grouped_mlp_kernels.py tests/test_grouped_mlp_api.py tests/test_grouped_mlp_reference.py &
run quant-so2 tests/test_quant_kernels.py tests/test_quant_api.py tests/test_quant_reference.py tests/test_so2_kernels.py tests/test_so2_api.py tests/test_so2_reference.py &
run dyt-check-tuning tests/test_dyt.py tests/test_dyt_api.py tests/test_check.py tests/test_tuning_dyt.py tests/test_tuning_gpu.py tests/test_tuning_sweep.py tests/test_tuning_table.py &
wait
for f in $OUT/pytest-*.txt; do echo "== $f"; tail -6 $f; done
