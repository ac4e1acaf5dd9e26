#!/bin/bash
# Run 4 (GPU): the whole test suite on this folder's final kernels, in gpu_tests.sh's seven
# processes (the first whole run of that layout). Carry .whl (hypothesis, sortedcontainers).
#   OUT=... bash benchmarks/results/2026-12-04-h200-ai/run4.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/hypothesis-*.whl .whl/sortedcontainers-*.whl
mkdir -p $OUT/run4
OUT=$OUT/run4 bash benchmarks/gpu_tests.sh ${1:-500}
