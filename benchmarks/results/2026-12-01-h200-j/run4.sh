#!/bin/bash
# Run 4: the three tests that failed in run 3's GPU suite, with tracebacks (that suite's
# processes hit their time limit before printing them); then the dyt bf16 forward keys at 4096
# and 8192 columns re-swept with tanh_f32's new polynomial (run 2 measured the persistent forward
# there slower than run 1 did).
#   OUT=... bash benchmarks/results/2026-12-01-h200-j/run4.sh
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/src
TILEFUSE_CACHE_DIR=$PWD/.tfcache-t timeout 100 python3 -m pytest -q -p no:cacheprovider -rfs --tb=short \
  "tests/test_check.py::test_dyt_host_cost_and_its_tables" \
  "tests/test_check.py::test_grouped_check_verifies_the_compose_route_and_can_fail_it" \
  "tests/test_dyt.py::test_channels_last_matches_reference" > "$OUT/pytest-failed3.txt" 2>&1
echo "exit $?" >> "$OUT/pytest-failed3.txt"
TILEFUSE_CACHE_DIR=$PWD/.tfcache timeout 90 python3 -m tilefuse.cli tune --op dyt --dtype bf16 --pass fwd \
  --shape 16384x4096 --shape 8192x8192 --force --no-progress > "$OUT/tune-dyt.txt" 2>&1
echo "tune exit $?" >> "$OUT/tune-dyt.txt"
TILEFUSE_CACHE_DIR=$PWD/.tfcache python3 -m tilefuse.cli tune --export-builtin "$OUT" >> "$OUT/tune-dyt.txt" 2>&1
