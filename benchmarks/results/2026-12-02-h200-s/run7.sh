#!/bin/bash
# Run 7: after the fp8 wgrad's shared blocks zeroed in A only: the grouped GPU tests of run 1,
# then run2_fp8_step.py again (the whole step and the op as called, balanced and routed).
#   OUT=... bash benchmarks/results/2026-12-02-h200-s/run7.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-s7
mkdir -p $OUT/run7
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run7/gpu.txt
timeout 330 python3 -m pytest -q -p no:cacheprovider tests/test_grouped_mlp_recipes.py \
  tests/test_grouped_mlp_kernels.py -k "fp8 or tma or wgrad or recipe or register" > $OUT/run7/pytest.txt 2>&1
echo "pytest exit $?" >> $OUT/run7/pytest.txt; grep -E "FAILED|ERROR|passed|failed|exit" $OUT/run7/pytest.txt | tail -12
timeout 200 python3 benchmarks/results/2026-12-02-h200-s/run2_fp8_step.py > $OUT/run7/step.txt 2>&1
echo "exit $?" >> $OUT/run7/step.txt; grep -v Warn $OUT/run7/step.txt
