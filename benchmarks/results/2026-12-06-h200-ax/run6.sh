#!/bin/bash
# Run 6 (GPU, any card; carry .whl): this session's fixes on the GPU: the test files they
# touched, in 10 pytest-xdist workers, verbose (cut at $1 seconds, default 330), then
# benchmarks/host_overhead.py (dyt's host cost per call, the hot path's plan key and saved
# metadata grew by the fake-mode and shape checks).
#   OUT=... bash benchmarks/results/2026-12-06-h200-ax/run6.sh [SECONDS]
set -u
cd "$(dirname "$0")/../../.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl > /dev/null 2>&1
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d)
mkdir -p $OUT/run6
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/run6/gpu.txt
timeout ${1:-330} python3 -m pytest -q -p no:cacheprovider -n 10 -rf tests/test_dyt.py tests/test_dyt_api.py \
  tests/test_dyt_lean.py tests/test_grouped_compose.py tests/test_grouped_mlp_api.py tests/test_grouped_mlp_recipes.py \
  tests/test_grouped_mlp_ws.py tests/test_policy.py tests/test_so2_api.py tests/test_tensor_kinds.py \
  > $OUT/run6/pytest.txt 2>&1
echo "pytest exit $? at ${SECONDS}s" >> $OUT/run6/pytest.txt
tail -4 $OUT/run6/pytest.txt; grep -E "^FAILED|^ERROR" $OUT/run6/pytest.txt | head -20
timeout 60 python3 benchmarks/host_overhead.py > $OUT/run6/host.txt 2>&1
echo "host exit $? at ${SECONDS}s" >> $OUT/run6/host.txt
tail -14 $OUT/run6/host.txt
