#!/bin/bash
# Run 2 (GPU; prepared): fp8_block's paired row-wise + column-wise quantizer (x, h, dy each from
# one launch, recipes.quantize_rows_cols) against the separate launches it replaced: bits and
# time per copy pair at the spec's three shapes, then the whole fp8_block step as called with
# each (recipes.PAIR_ROWS_COLS), beside bf16 tilefuse, and eagerly with and without
# tilefuse.reuse_quantized_weights (quant_pair.py). Its GPU tests first.
# Carry .whl (hypothesis, sortedcontainers).
#   OUT=... bash benchmarks/results/2026-12-05-h200-ak/run2.sh
set -u
cd "$(dirname "$0")/../../.."
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/hypothesis-*.whl .whl/sortedcontainers-*.whl
export PYTHONUNBUFFERED=1 TILEFUSE_CACHE_DIR=$(mktemp -d)
mkdir -p $OUT/run2
PYTHONPATH=/tmp/site:$PWD/src timeout 200 python3 -m pytest -q -x -p no:cacheprovider tests/test_grouped_mlp_recipes.py \
  tests/test_quant_kernels.py > $OUT/run2/tests.txt 2>&1
echo "exit $?" >> $OUT/run2/tests.txt
tail -4 $OUT/run2/tests.txt
PYTHONPATH=$PWD/src timeout 360 python3 benchmarks/results/2026-12-05-h200-ak/quant_pair.py > $OUT/run2/quant_pair.txt 2>&1
echo "exit $?" >> $OUT/run2/quant_pair.txt
tail -12 $OUT/run2/quant_pair.txt
