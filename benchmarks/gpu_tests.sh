#!/bin/bash
# Does this tree pass its whole test suite on this GPU?
#
# The suite in seven pytest processes sharing the GPU (one process needs more than the
# device's 10-minute command limit): the warp-specialised row GEMM's tests (ws_rows, the
# largest GPU file since results/2026-12-03-h200-ab); the other grouped_glu_mlp files; the
# quantizers and so2_mixing_stack; the property, tuning and launcher tests; every other test
# file (dyt, check, nn, ...). Three processes took about 4.5 minutes on the H200 before the
# Gluon kernels' tests (results/2026-12-01-h200-g run 3, the longest 265 s); with four, the
# last one (everything not grouped, quant or so2) reached the 500 s limit
# (results/2026-12-04-h200-ag run 7), hence the fifth. The nine sm_90 compile tests (CPU-bound:
# ptxas) run in two processes of their own, one per ptxas they check (PTXAS in tests/sm90_helpers.py:
# each took about 290 s beside three others, results/2026-12-04-h200-ah run 1), and the five
# above deselect them.
# Each process has its own tuning cache ($PWD/.tfcache-NAME) and writes $OUT/pytest-NAME.txt;
# test timings under the shared GPU are not measurements.
#
#   OUT=/tmp/out PYTHONPATH=src bash benchmarks/gpu_tests.sh [TIMEOUT_S]
#
# Prints, per process, its FAILED / ERROR lines and pytest's summary line, then the exit status
# of each process (130 or 124: stopped at the limit, its failures so far still listed); exits
# non-zero when any failed. Give TIMEOUT_S 540 (the default) or more: with all seven processes
# sharing the machine's 16 cores the grouped and "rest" processes needed more than 480 s
# (results/2026-12-04-h200-ai run 4 has the per-process times; its run 5 ran the remainder).
# The "rest" files are dealt by size, alternately, between the rest process (half 0, the
# largest file's) and the tuning process (half 1): run alone on the H200 the whole of rest
# reached the 540 s limit (results/2026-12-04-h200-aj run 13, tuning 202 s), and its half 1
# took 133 s as a process of its own (-aj run 8, half 0 cut at 427 s).
# The property tests need hypothesis and sortedcontainers (carried as wheels: benchmarks/README.md).
limit=${1:-540}
: "${OUT:?set OUT to an output folder}"
export PYTHONUNBUFFERED=1
PYTEST='import signal, sys, pytest; signal.signal(signal.SIGINT, signal.default_int_handler); sys.exit(pytest.main(sys.argv[1:]))'
grouped=$(ls tests/test_grouped_*.py | grep -v /test_grouped_ws_rows.py)
tuning=$(ls tests/test_property_*.py tests/test_tuning_*.py tests/test_specializing_launcher.py)
rest=$(ls tests/test_*.py | grep -v -e /test_grouped_ -e /test_quant_ -e /test_so2_ -e /test_property_ -e /test_tuning_ \
       -e /test_specializing_launcher.py)
half() {  # half 0|1 of the files named after it, by size, dealt alternately
  local k=$1; shift
  ls -S "$@" | awk -v k="$k" 'NR % 2 == 1 - k'
}
run() {  # name, files...
  local name=$1; shift
  # SIGINT at the limit: pytest stops as on Ctrl-C and still prints its failures so far with
  # their reasons (a plain kill loses them: results/2026-12-01-h200-j run 3); killed 30 s later.
  # A background job of a script starts with SIGINT ignored, so Python restores its handler.
  TILEFUSE_CACHE_DIR=$PWD/.tfcache-$name timeout -s INT -k 30 "$limit" python3 -c "$PYTEST" -q -p no:cacheprovider \
    -rfs --tb=short "$@" > "$OUT/pytest-$name.txt" 2>&1
  echo "exit $?" >> "$OUT/pytest-$name.txt"
}
compile="compile_for_sm90 or compiles_for_sm90"    # the nine compile tests' names, and only theirs
run ws-rows tests/test_grouped_ws_rows.py -k "not ($compile)" &
run grouped $grouped -k "not ($compile)" &
run quant-so2 tests/test_quant_*.py tests/test_so2_*.py -k "not ($compile)" &
run tuning $tuning $(half 1 $rest) -k "not ($compile)" &
run rest $(half 0 $rest) -k "not ($compile)" &
run compile-triton tests/test_*.py -k "($compile) and triton" &
run compile-torch tests/test_*.py -k "($compile) and torch" &
wait
status=0
for f in "$OUT"/pytest-ws-rows.txt "$OUT"/pytest-grouped.txt "$OUT"/pytest-quant-so2.txt "$OUT"/pytest-tuning.txt \
         "$OUT"/pytest-rest.txt "$OUT"/pytest-compile-triton.txt "$OUT"/pytest-compile-torch.txt; do
  echo "== $f"; grep -E "^(FAILED|ERROR)" "$f" | head -20; tail -2 "$f"
  tail -1 "$f" | grep -qx "exit 0" || status=1
done
exit $status
