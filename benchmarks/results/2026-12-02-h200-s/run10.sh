#!/bin/bash
# Run 10: the bias-gradient paths on the GPU after grouped_colsum_kernel lost its unused E
# argument (b02d946): the grouped compose, kernels and layouts tests with a bias.
#   OUT=... bash benchmarks/results/2026-12-02-h200-s/run10.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-s10
mkdir -p $OUT/run10
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run10/gpu.txt
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/test_grouped_compose.py tests/test_grouped_mlp_kernels.py \
  tests/test_grouped_mlp_layouts.py -k bias > $OUT/run10/pytest.txt 2>&1
echo "pytest exit $?" >> $OUT/run10/pytest.txt; grep -E "FAILED|ERROR|passed|failed|exit" $OUT/run10/pytest.txt | tail -12
