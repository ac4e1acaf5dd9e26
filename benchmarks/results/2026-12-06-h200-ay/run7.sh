#!/bin/bash
# Run 7 (GPU, either card; carry .whl): the test files changed after run 3 (the whole-change
# read's tidy, the expert-parallel and HF adapter fixes, the benchmark helpers), 10 pytest-xdist
# workers (cut at $1 seconds, default 300).
#   OUT=... bash benchmarks/results/2026-12-06-h200-ay/run7.sh [SECONDS]
set -u
cd "$(dirname "$0")/../../.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  > /dev/null 2>&1 || echo "pip failed"
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d)
mkdir -p $OUT/run7
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/run7/gpu.txt
timeout ${1:-300} python3 -m pytest -q -p no:cacheprovider -n 10 -rf tests/test_tensor_kinds.py \
  tests/test_grouped_mlp_api.py tests/test_grouped_plan.py tests/test_dyt_lean.py tests/test_dyt_api.py \
  tests/test_quant_api.py tests/test_hf_adapter.py tests/test_expert_parallel.py tests/test_tuning_robustness.py \
  tests/test_benchmark_checks.py tests/test_nn_dyt_fixes.py tests/test_tuning_sweep.py tests/test_so2_api.py \
  > $OUT/run7/pytest.txt 2>&1
echo "pytest exit $? at ${SECONDS}s" >> $OUT/run7/pytest.txt
tail -4 $OUT/run7/pytest.txt; grep -E "^FAILED|^ERROR" $OUT/run7/pytest.txt | head -20
