#!/bin/bash
# Run 4: run4_regs_probe.py (the backward kernel's registers on this machine's Triton, f947b08
# against this tree); the dyt memory-growth test alone in a fresh process (it failed in run 3's
# dyt process); then the whole GPU suite on this tree (benchmarks/gpu_tests.sh, 380 s a process).
#   OUT=... bash benchmarks/results/2026-12-01-h200-k/run4.sh     (carry .whl)
here="$(dirname "$0")"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/src
timeout 60 python3 "$here/run4_regs_probe.py" > "$OUT/regs.txt" 2>&1; echo "exit $?" >> "$OUT/regs.txt"
TILEFUSE_CACHE_DIR=$PWD/.tfcache-mem timeout 60 python3 -m pytest -q -p no:cacheprovider -rfs \
  "tests/test_dyt_lean.py::test_repeated_calls_do_not_grow_memory" > "$OUT/pytest-memgrowth.txt" 2>&1
echo "exit $?" >> "$OUT/pytest-memgrowth.txt"
bash benchmarks/gpu_tests.sh 380 > "$OUT/gpu-tests.txt" 2>&1; echo "gpu_tests exit $?" >> "$OUT/gpu-tests.txt"
