#!/bin/bash
# Run 3: the tree after run 2's finding (tanh_f32 and the backward's formula back as they were;
# only the bfloat16 pairs stay): the dyt GPU tests; run2_dyt_bench.py with the table as it is;
# every bf16 backward key of the grid re-swept and exported; run2_dyt_bench.py (bf16) again
# with the swept entries in the cache.
#   OUT=... bash benchmarks/results/2026-12-01-h200-k/run3.sh     (carry .whl)
here="$(dirname "$0")"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/src
TILEFUSE_CACHE_DIR=$PWD/.tfcache-tests timeout 170 python3 -m pytest -q -p no:cacheprovider -rfs tests/test_dyt.py tests/test_dyt_lean.py \
  > "$OUT/pytest-dyt.txt" 2>&1; echo "exit $?" >> "$OUT/pytest-dyt.txt"
export TILEFUSE_CACHE_DIR=$PWD/.tfcache
timeout 90 python3 "$here/run2_dyt_bench.py" --json "$OUT/bench-before-sweep.json" > "$OUT/bench-before-sweep.txt" 2>&1
echo "exit $?" >> "$OUT/bench-before-sweep.txt"
timeout 300 python3 -m tilefuse.cli tune --op dyt --dtype bf16 --pass bwd --shape 4194304x16 --shape 2097152x32 \
  --shape 1048576x64 --shape 524288x128 --shape 262144x256 --shape 131072x512 --shape 65536x1024 --shape 32768x2048 \
  --shape 16384x4096 --shape 8192x8192 --force --no-progress > "$OUT/tune-dyt-bwd.txt" 2>&1
echo "tune exit $?" >> "$OUT/tune-dyt-bwd.txt"
python3 -m tilefuse.cli tune --export-builtin "$OUT" >> "$OUT/tune-dyt-bwd.txt" 2>&1
timeout 60 python3 "$here/run2_dyt_bench.py" --dtypes bf16 --json "$OUT/bench-after-sweep.json" > "$OUT/bench-after-sweep.txt" 2>&1
echo "exit $?" >> "$OUT/bench-after-sweep.txt"
