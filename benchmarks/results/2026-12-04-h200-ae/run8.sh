#!/bin/bash
# Run 8 (GPU; prepared, not run in the stop that wrote it): run 7's measurement at the SwiGLU
# keys with biases (the spec's three shapes x interleave 32 / halves: 6 keys).
#   OUT=... bash benchmarks/results/2026-12-04-h200-ae/run8.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d)
mkdir -p $OUT/run8
timeout 400 python3 benchmarks/grouped_compose_gpu_check.py --interleaves 32,none --activations swiglu --bias on \
  --providers "compiled composition,tilefuse" --rounds 5 --profile none > $OUT/run8/check.txt 2>&1
echo "exit $?" >> $OUT/run8/check.txt; grep -E "^shape|tilefuse  |compiled comp|FAIL|exit" $OUT/run8/check.txt | cut -c1-150
