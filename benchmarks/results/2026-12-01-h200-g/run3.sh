#!/bin/bash
# H200 run 3 of 2026-12-01-h200-g: re-sweep the built-in table's two so2 keys (measured before
# the backward read contiguous W^T), then the whole GPU test suite in three pytest processes.
# Carry .whl (hypothesis, sortedcontainers; the rest is for so2_peers.py).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1 || exit 3
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src
D=$PWD/.tfcache-sweep
TILEFUSE_CACHE_DIR=$D timeout 240 python3 -m tilefuse.cli tune --op so2_mixing_stack --shape 3x32 --shape 6x32 \
    --force --rounds 6 --no-progress > $OUT/so2_sweep.txt 2>&1; echo "exit $?" >> $OUT/so2_sweep.txt
cp $D/*.json $OUT/so2_sweep_cache.json 2>/dev/null
cat $OUT/so2_sweep.txt
run() {  # name, files...
  local name=$1; shift
  TILEFUSE_CACHE_DIR=$PWD/.tfcache-$name timeout 330 python3 -m pytest -q -p no:cacheprovider -rfs "$@" > $OUT/pytest-$name.txt 2>&1
  echo "exit $?" >> $OUT/pytest-$name.txt
}
run grouped tests/test_grouped_mlp_*.py &
run quant-so2 tests/test_quant_*.py tests/test_so2_*.py tests/test_layouts_so2_dyt_quant.py tests/test_interpreter_dot.py &
run dyt-check-tuning tests/test_dyt*.py tests/test_check.py tests/test_tuning_*.py tests/test_nn_dyt_fixes.py tests/test_property_views.py &
wait
for f in $OUT/pytest-*.txt; do echo "== $f"; grep -E "^(FAILED|ERROR)" $f | head -20; tail -2 $f; done
