#!/bin/bash
# Run 2: tanh_f32 with the polynomial below 0.75 (639792d): the dyt GPU tests (tanh accuracy
# over the range, the float64 bounds at every path) and `tilefuse bench --ops dyt`.
#   OUT=... bash benchmarks/results/2026-12-01-h200-j/run2.sh
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
python3 -m tilefuse.cli info > "$OUT/env.json" 2>&1
TILEFUSE_CACHE_DIR=$PWD/.tfcache-dyt timeout 200 python3 -m pytest -q -p no:cacheprovider -rfs tests/test_dyt*.py \
  > "$OUT/pytest-dyt.txt" 2>&1; echo "exit $?" >> "$OUT/pytest-dyt.txt"
TILEFUSE_CACHE_DIR=$PWD/.tfcache timeout 280 python3 -m tilefuse.cli bench --no-progress --ops dyt --out "$OUT/dyt" \
  > "$OUT/bench-dyt.txt" 2>&1; echo "bench exit $?" >> "$OUT/bench-dyt.txt"
