#!/bin/bash
# Run 36 (GPU, any Hopper card): the Gluon column-wise quantizer's GPU tests (tile and TMA-ring
# forms bitwise the Triton launches; the op's fp8_block step with GLUON_COLS_STAGES bitwise the
# Triton launches' step), before runs 34-35 time them.
#   OUT=... [LIMIT=seconds, default 100] bash benchmarks/results/2026-12-07-h200-bf/run36.sh
set -u
cd "$(dirname "$0")/../../.."
mkdir -p $OUT/run36
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader > $OUT/run36/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run36/gpu.txt
cat $OUT/run36/gpu.txt
python3 -m pip install --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  > $OUT/run36/pip.txt 2>&1
PYTHONPATH=/tmp/site:$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d) timeout ${LIMIT:-100} python3 -m pytest -q -p no:cacheprovider \
  -n 4 -rfs tests/test_quant_kernels.py tests/test_grouped_mlp_recipes.py -k "gluon" > $OUT/run36/tests.txt 2>&1
echo "exit $? at ${SECONDS}s" >> $OUT/run36/tests.txt
tail -4 $OUT/run36/tests.txt | cut -c1-300
