#!/bin/bash
# Run 3 (GPU, either card; carry .whl): this session's fixes on the GPU: the test files they
# touched, in 10 pytest-xdist workers (cut at $1 seconds, default 420).
#   OUT=... bash benchmarks/results/2026-12-06-h200-ay/run3.sh [SECONDS]
set -u
cd "$(dirname "$0")/../../.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  > /dev/null 2>&1 || echo "pip failed"
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d)
mkdir -p $OUT/run3
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/run3/gpu.txt
timeout ${1:-420} python3 -m pytest -q -p no:cacheprovider -n 10 -rf tests/test_tensor_kinds.py tests/test_dyt_lean.py \
  tests/test_dyt_api.py tests/test_grouped_plan.py tests/test_specializing_launcher.py tests/test_so2_api.py \
  tests/test_grouped_mlp_api.py tests/test_policy.py tests/test_tuning_robustness.py tests/test_tuning_table.py \
  tests/test_tuning_sweep.py tests/test_tuning_so2.py tests/test_so2_level3.py tests/test_builtin_tables.py \
  tests/test_benchmark_checks.py tests/test_nn_dyt_fixes.py tests/test_grouped_mlp_module_compat.py \
  tests/test_so2_kernels.py tests/test_tuning_dyt.py > $OUT/run3/pytest.txt 2>&1
echo "pytest exit $? at ${SECONDS}s" >> $OUT/run3/pytest.txt
tail -4 $OUT/run3/pytest.txt; grep -E "^FAILED|^ERROR" $OUT/run3/pytest.txt | head -20
