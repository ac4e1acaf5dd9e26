#!/bin/bash
# Run 8 (GPU; prepared): the GPU tests of every file whose launches moved to
# SpecializingLaunchers (cd146f8, 6a3e781: grouped_gemm_kernel, grouped_wgrad_kernel,
# fp8_block_kernel, fp8_ws_gemm_kernel), of the launcher itself and of the timer's settle
# (test_tuning_gpu.py). Carries .whl (hypothesis, sortedcontainers for the property tests).
#   OUT=... bash benchmarks/results/2026-12-04-h200-aj/run8.sh
set -u
cd "$(dirname "$0")/../../.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src:/tmp/site TILEFUSE_CACHE_DIR=$(mktemp -d)
mkdir -p $OUT/run8
timeout 540 python3 -m pytest -q -p no:cacheprovider -rfs --tb=short tests/test_grouped_mlp_kernels.py \
  tests/test_grouped_mlp_recipes.py tests/test_grouped_mlp_ws.py tests/test_quant_kernels.py \
  tests/test_specializing_launcher.py tests/test_tuning_gpu.py -k "not compiles" > $OUT/run8/pytest.txt 2>&1
echo "exit $?" >> $OUT/run8/pytest.txt
grep -E "^(FAILED|ERROR)" $OUT/run8/pytest.txt | head -20; tail -2 $OUT/run8/pytest.txt
