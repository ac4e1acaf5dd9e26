#!/bin/bash
# Run 3: the GPU tests of the paths changed since the last full GPU suite (dyt with the
# prefetching backward and the new table, the lean path, the review commits' grouped compose
# route and so2 compose / level-3 / kernels), two pytest processes sharing the GPU; then
# `tilefuse bench --ops dyt` (2^26 elements, every provider, graph replay and eager loop, host cost).
#   OUT=... bash benchmarks/results/2026-12-01-h200-i/run3.sh
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
python3 -m tilefuse.cli info > "$OUT/env.json" 2>&1
t() {  # name, files...
  local name=$1; shift
  TILEFUSE_CACHE_DIR=$PWD/.tfcache-$name timeout 210 python3 -m pytest -q -p no:cacheprovider -rfs "$@" \
    > "$OUT/pytest-$name.txt" 2>&1; echo "exit $?" >> "$OUT/pytest-$name.txt"
}
t dyt tests/test_dyt*.py tests/test_tuning_gpu.py &
t compose tests/test_grouped_compose.py tests/test_so2_compose.py tests/test_so2_level3.py tests/test_so2_kernels.py &
wait
TILEFUSE_CACHE_DIR=$PWD/.tfcache timeout 330 python3 -m tilefuse.cli bench --no-progress --ops dyt --out "$OUT/dyt" \
  > "$OUT/bench-dyt.txt" 2>&1; echo "bench exit $?" >> "$OUT/bench-dyt.txt"
