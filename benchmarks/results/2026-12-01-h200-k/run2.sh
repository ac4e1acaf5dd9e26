#!/bin/bash
# Run 2: the dyt kernels after tanh_f32's sign as a bit operation, alpha folded into the
# backward's weight and bfloat16 pairs read as int32 (the channels-last backward's PAIRS):
# the dyt GPU tests; run2_dyt_bench.py with the table as it was (the kernels changed, the
# configs not); the bf16 backward keys that missed 85% in 2026-12-01-h200-j run 2 (widths 16,
# 512, 1024, 2048, 8192) re-swept and exported; run2_dyt_bench.py again with those entries.
#   OUT=... bash benchmarks/results/2026-12-01-h200-k/run2.sh     (carry .whl)
here="$(dirname "$0")"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/src
TILEFUSE_CACHE_DIR=$PWD/.tfcache-tests timeout 170 python3 -m pytest -q -p no:cacheprovider -rfs -x tests/test_dyt.py tests/test_dyt_lean.py \
  > "$OUT/pytest-dyt.txt" 2>&1; echo "exit $?" >> "$OUT/pytest-dyt.txt"
export TILEFUSE_CACHE_DIR=$PWD/.tfcache
timeout 90 python3 "$here/run2_dyt_bench.py" --json "$OUT/bench-before-sweep.json" > "$OUT/bench-before-sweep.txt" 2>&1
echo "exit $?" >> "$OUT/bench-before-sweep.txt"
timeout 200 python3 -m tilefuse.cli tune --op dyt --dtype bf16 --pass bwd --shape 4194304x16 --shape 131072x512 \
  --shape 65536x1024 --shape 32768x2048 --shape 8192x8192 --force --no-progress > "$OUT/tune-dyt-bwd.txt" 2>&1
echo "tune exit $?" >> "$OUT/tune-dyt-bwd.txt"
python3 -m tilefuse.cli tune --export-builtin "$OUT" >> "$OUT/tune-dyt-bwd.txt" 2>&1
timeout 60 python3 "$here/run2_dyt_bench.py" --dtypes bf16 --json "$OUT/bench-after-sweep.json" > "$OUT/bench-after-sweep.txt" 2>&1
echo "exit $?" >> "$OUT/bench-after-sweep.txt"
