#!/bin/bash
# Run 5: the dyt sources back at f947b08 (the pairs reverted after runs 3 and 4): the dyt
# memory-growth test alone in a fresh process (it failed alone in run 4), and
# run2_dyt_bench.py (fp32 and bf16) to compare with run 3.
#   OUT=... bash benchmarks/results/2026-12-01-h200-k/run5.sh     (carry .whl)
here="$(dirname "$0")"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
TILEFUSE_CACHE_DIR=$PWD/.tfcache-mem timeout 60 python3 -m pytest -q -p no:cacheprovider -rfs \
  "tests/test_dyt_lean.py::test_repeated_calls_do_not_grow_memory" > "$OUT/pytest-memgrowth.txt" 2>&1
echo "exit $?" >> "$OUT/pytest-memgrowth.txt"
TILEFUSE_CACHE_DIR=$PWD/.tfcache timeout 100 python3 "$here/run2_dyt_bench.py" --json "$OUT/bench.json" > "$OUT/bench.txt" 2>&1
echo "exit $?" >> "$OUT/bench.txt"
