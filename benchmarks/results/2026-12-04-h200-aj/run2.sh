#!/bin/bash
# Run 2 (GPU): the whole test suite on this folder's tree (the fp8 table of run 1 merged into
# the built-in table), in gpu_tests.sh's seven processes at its 540 s default (first run of that
# default). Carry .whl (hypothesis, sortedcontainers).
#   OUT=... bash benchmarks/results/2026-12-04-h200-aj/run2.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/hypothesis-*.whl .whl/sortedcontainers-*.whl
mkdir -p $OUT/run2
OUT=$OUT/run2 bash benchmarks/gpu_tests.sh
