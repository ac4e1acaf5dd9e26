#!/bin/bash
# Does this tree pass its whole test suite on this GPU?
#
# The suite in three pytest processes sharing the GPU (one process needs more than the
# device's 10-minute command limit; the three together about 4.5 minutes on the H200, the
# longest 265 s in results/2026-12-01-h200-g run 3): grouped_glu_mlp; the quantizers and
# so2_mixing_stack; every other test file (dyt, check, tuning, nn, property tests, ...).
# Each process has its own tuning cache ($PWD/.tfcache-NAME) and writes $OUT/pytest-NAME.txt;
# test timings under the shared GPU are not measurements.
#
#   OUT=/tmp/out PYTHONPATH=src bash benchmarks/gpu_tests.sh [TIMEOUT_S]
#
# Prints, per process, its FAILED / ERROR lines and pytest's summary line, then the exit status
# of each process; exits non-zero when any failed. Time on the H200: about 4.5 minutes.
# The property tests need hypothesis and sortedcontainers (carried as wheels: benchmarks/README.md).
limit=${1:-480}
: "${OUT:?set OUT to an output folder}"
export PYTHONUNBUFFERED=1
rest=$(ls tests/test_*.py | grep -v -e /test_grouped_mlp_ -e /test_quant_ -e /test_so2_)
run() {  # name, files...
  local name=$1; shift
  TILEFUSE_CACHE_DIR=$PWD/.tfcache-$name timeout "$limit" python3 -m pytest -q -p no:cacheprovider -rfs "$@" \
    > "$OUT/pytest-$name.txt" 2>&1
  echo "exit $?" >> "$OUT/pytest-$name.txt"
}
run grouped tests/test_grouped_mlp_*.py &
run quant-so2 tests/test_quant_*.py tests/test_so2_*.py &
run rest $rest &
wait
status=0
for f in "$OUT"/pytest-grouped.txt "$OUT"/pytest-quant-so2.txt "$OUT"/pytest-rest.txt; do
  echo "== $f"; grep -E "^(FAILED|ERROR)" "$f" | head -20; tail -2 "$f"
  tail -1 "$f" | grep -qx "exit 0" || status=1
done
exit $status
