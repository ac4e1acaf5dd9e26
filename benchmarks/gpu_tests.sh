#!/bin/bash
# Does this tree pass its whole test suite on this GPU?
#
# The suite in pytest-xdist workers sharing the GPU: most of its time is CPU-bound (Triton and
# ptxas compiles, the sm_90 compile reports), so WORKERS processes (default 10, for a machine of
# 16 cores) take it from a chain of files no single 10-minute command could hold to about 5
# minutes: 304 s on an H100 (results/2026-12-06-h200-aw run 1). Not yet timed this way on the
# H200, where the seven hand-dealt pytest processes it replaced took about 8 minutes
# (results/2026-12-04-h200-aj run 2). Each worker has its own session-private tuning cache (tests/conftest.py);
# test timings under the shared GPU are not measurements.
#
#   OUT=/tmp/out PYTHONPATH=src [TESTS="tests/test_grouped_mlp_ws.py tests/test_grouped_ws_rows.py"] [MEMCHECK=1] \
#     bash benchmarks/gpu_tests.sh [TIMEOUT_S] [WORKERS]
#
# TESTS: the test paths to run (default: tests, the whole suite). MEMCHECK=1 (unset or 0: off): every worker under
# compute-sanitizer's memcheck (on the device image), with PyTorch's caching allocator off so
# that each tensor is an allocation of its own and a read or write past a tensor's end is
# reported (with the allocator on, a stray access inside a cached segment is not); the
# sanitizer's error makes the exit code 99. Several times slower (not timed side by side): the
# warp-specialised kernels' two test files took 298 s in 6 workers (results/2026-12-07-h200-bf
# run 12, where a planted out-of-bounds Triton store was reported, run 11), so give it a subset
# within the limit.
#
# Needs pytest-xdist and execnet, and for the property tests hypothesis and sortedcontainers
# (on the device image: carried as wheels, benchmarks/README.md; install them with
# `pip install --no-index --no-deps --target DIR .whl/...` and put DIR on PYTHONPATH).
# Writes $OUT/pytest.txt, verbose (each finished test's verdict, so a run stopped at the limit
# still says what passed); prints its FAILED / ERROR lines and pytest's summary; exits
# non-zero when a test failed or the run was stopped (130 or 124).
limit=${1:-540}
workers=${2:-10}
: "${OUT:?set OUT to an output folder}"
export PYTHONUNBUFFERED=1
# SIGINT at the limit: pytest stops as on Ctrl-C and still prints its failures so far with
# their reasons (a plain kill loses them); killed 30 s later.
sanitizer=()
if [ "${MEMCHECK:-0}" != 0 ]; then
  command -v compute-sanitizer > /dev/null || { echo "MEMCHECK=1: compute-sanitizer is not on the PATH"; exit 127; }
  export PYTORCH_NO_CUDA_MEMORY_CACHING=1
  sanitizer=(compute-sanitizer --tool memcheck --error-exitcode 99 --print-limit 20 --target-processes all)
fi
# shellcheck disable=SC2086  # TESTS is a list of paths
timeout -s INT -k 30 "$limit" "${sanitizer[@]}" python3 -m pytest -v -rfE --tb=short -p no:cacheprovider \
  -n "$workers" --durations=15 ${TESTS:-tests} > "$OUT/pytest.txt" 2>&1
status=$?
echo "exit $status" >> "$OUT/pytest.txt"
grep -E "^(FAILED|ERROR)|ERROR SUMMARY|Invalid " "$OUT/pytest.txt" | head -40
grep -E "(passed|failed).* in [0-9.]+s" "$OUT/pytest.txt" | tail -1
echo "exit $status"
exit $status
