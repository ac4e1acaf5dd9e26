#!/bin/bash
# Run 13 (GPU; prepared 2026-12-05): the whole suite again in gpu_tests.sh's seven processes at
# its 540 s default, alone on the machine, after run 8's fixes: a tensor's device in
# SpecializingLauncher's key, the fork/join tests on the suite's device, the check's Gluon row
# only at widths the Gluon kernels take, the table-pick test on its own table, the expert-
# parallel dispatch's one host sync (its new one-GPU NCCL test), the sweep-timing bound's
# message. Run 8 did not reach part of grouped-a's and rest-a's files nor grouped-b's tests after
# its fault. Carry .whl (hypothesis, sortedcontainers).
#   OUT=... bash benchmarks/results/2026-12-04-h200-aj/run13.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/hypothesis-*.whl .whl/sortedcontainers-*.whl
mkdir -p $OUT/run13
OUT=$OUT/run13 bash benchmarks/gpu_tests.sh
