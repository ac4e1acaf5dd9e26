#!/bin/bash
# Run 2 (GPU, either card; carry .whl): this session's first fixes on the GPU: the test files
# they touched (the cached quantized weights on two streams, the launch keys' constexprs, the
# backward plan's saved-tensor check, the quantizers' documented edges, DyT on jagged tensors),
# in 10 pytest-xdist workers (cut at $1 seconds, default 400).
#   OUT=... bash benchmarks/results/2026-12-06-h200-az/run2.sh [SECONDS]
set -u
cd "$(dirname "$0")/../../.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  > /dev/null 2>&1 || echo "pip failed"
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d)
mkdir -p $OUT/run2
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/run2/gpu.txt
timeout ${1:-400} python3 -m pytest -q -p no:cacheprovider -n 10 -rf tests/test_grouped_mlp_recipes.py \
  tests/test_specializing_launcher.py tests/test_grouped_plan.py tests/test_grouped_ws_rows.py \
  tests/test_grouped_ws_wgrad.py tests/test_quant_api.py tests/test_nn_dyt_fixes.py > $OUT/run2/pytest.txt 2>&1
echo "pytest exit $? at ${SECONDS}s" >> $OUT/run2/pytest.txt
tail -4 $OUT/run2/pytest.txt; grep -E "^FAILED|^ERROR" $OUT/run2/pytest.txt | head -20
