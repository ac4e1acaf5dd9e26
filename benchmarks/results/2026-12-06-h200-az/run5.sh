#!/bin/bash
# Run 5 (GPU, either card; carry .whl): the last fixes on the GPU (a read of this session's changes): the test files
# they touched (the backward plan's saved-tensor check with ends and devices, collect's lock,
# DyT's jagged path without holes, the level policy),
# in 10 pytest-xdist workers (cut at $1 seconds, default 400).
#   OUT=... bash benchmarks/results/2026-12-06-h200-az/run5.sh [SECONDS]
set -u
cd "$(dirname "$0")/../../.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  > /dev/null 2>&1 || echo "pip failed"
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d)
mkdir -p $OUT/run5
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/run5/gpu.txt
timeout ${1:-400} python3 -m pytest -q -p no:cacheprovider -n 10 -rf tests/test_grouped_plan.py tests/test_grouped_compose.py \
  tests/test_policy.py tests/test_tuning_robustness.py tests/test_nn_dyt_fixes.py tests/test_grouped_mlp_api.py > $OUT/run5/pytest.txt 2>&1
echo "pytest exit $? at ${SECONDS}s" >> $OUT/run5/pytest.txt
tail -4 $OUT/run5/pytest.txt; grep -E "^FAILED|^ERROR" $OUT/run5/pytest.txt | head -20
