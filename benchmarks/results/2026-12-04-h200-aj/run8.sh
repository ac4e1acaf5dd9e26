#!/bin/bash
# Run 8 (GPU; prepared): the whole suite in gpu_tests.sh's processes (ten since 2026-12-05: the
# grouped, quant-so2 and rest processes in halves) at its 540 s default (as run 2), after this
# folder's later changes: the kernels route's launches through SpecializingLaunchers (cd146f8,
# 6a3e781), and the next session's fixes (tokens_per_expert
# checked against wraps, the dGLU's z through pointers for runs under 16 bytes, so2 float64 on
# the reference and its weight gradients in IEEE fp32, the device guard, rows off 16 bytes on
# the fused kernels, the level-3 validation of the weight gradients, the timer's settle).
# Carry .whl (hypothesis, sortedcontainers).
#   OUT=... bash benchmarks/results/2026-12-04-h200-aj/run8.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/hypothesis-*.whl .whl/sortedcontainers-*.whl
mkdir -p $OUT/run8
OUT=$OUT/run8 bash benchmarks/gpu_tests.sh
status=$?
tar czf $OUT/run8.tgz -C $OUT run8 && rm -r $OUT/run8   # ten reports: the device returns 8 files at most
exit $status
