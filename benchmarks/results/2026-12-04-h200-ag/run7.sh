#!/bin/bash
# Run 7 (GPU; prepared, not run: the session's device time was spent): the whole test suite on
# the final tree of this folder's work (runs 4-6 left test_check.py and most of
# test_grouped_mlp_ws.py unrun on the GPU, and the two side-stream tests were folded into
# gpu_helpers.one_and_two_streams after run 6). Carry .whl (hypothesis, sortedcontainers).
#   OUT=... bash benchmarks/results/2026-12-04-h200-ag/run7.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/hypothesis-*.whl .whl/sortedcontainers-*.whl
mkdir -p $OUT/run7
OUT=$OUT/run7 bash benchmarks/gpu_tests.sh 500
