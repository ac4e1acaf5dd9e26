#!/bin/bash
# Run 4 (GPU): the whole test suite on the H200 at this tree (benchmarks/gpu_tests.sh, four
# processes), the first whole-suite GPU run since results/2026-12-01-h200-l run 6.
#   OUT=... bash benchmarks/results/2026-12-04-h200-af/run4.sh   (carry: .whl with hypothesis, sortedcontainers)
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/hypothesis-*.whl .whl/sortedcontainers-*.whl
mkdir -p $OUT/run4
python3 -m tilefuse.cli info > $OUT/run4/env.json 2>&1
start=$(date +%s)
OUT=$OUT/run4 bash benchmarks/gpu_tests.sh 530
echo "wall $(( $(date +%s) - start )) s"
