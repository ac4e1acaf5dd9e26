#!/bin/bash
# Run 3 (GPU): issue 16's bf16 shape 2, where -ag run 5 read 1.193x against the 1.20x target
# (run 2's call of -ag's as_called_product.py no longer matched the benchmark's signature):
# the op as called against the compiled composition, both layouts, 11 rounds, with the same op
# on one stream (benchmarks/grouped_compose_gpu_check.py --one-stream).
#   OUT=... bash benchmarks/results/2026-12-04-h200-ah/run3.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d)
mkdir -p $OUT/run3
timeout 300 python3 benchmarks/grouped_compose_gpu_check.py --one-stream --providers "compiled composition,tilefuse" \
  --shapes 2 --interleaves 32,none --rounds 11 --profile none > $OUT/run3/as_called.txt 2>&1
echo "exit $?" >> $OUT/run3/as_called.txt
grep -v "^  PASS" $OUT/run3/as_called.txt | cut -c1-260 | tail -30
