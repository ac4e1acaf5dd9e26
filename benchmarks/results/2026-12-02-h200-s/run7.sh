#!/bin/bash
# Run 7: after the fp8 wgrad's shared blocks zeroed in A only (4cf26ca): the grouped GPU tests
# of the fp8 wgrad, TMA and recipe graph paths; run2_fp8_step.py again (the whole step and the
# op as called, balanced and routed); run8_fp8_roles_vs_bf16.py (each fp8 role against its
# bf16 torch._grouped_mm GEMM). One call: the session's device time was short.
#   OUT=... bash benchmarks/results/2026-12-02-h200-s/run7.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-s7
mkdir -p $OUT/run7 $OUT/run8
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run7/gpu.txt
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/test_grouped_mlp_recipes.py \
  tests/test_grouped_mlp_kernels.py -k "wgrad or fp8_tma or register or graph or heuristic" > $OUT/run7/pytest.txt 2>&1
echo "pytest exit $?" >> $OUT/run7/pytest.txt; grep -E "FAILED|ERROR|passed|failed|exit" $OUT/run7/pytest.txt | tail -12
timeout 150 python3 benchmarks/results/2026-12-02-h200-s/run2_fp8_step.py > $OUT/run7/step.txt 2>&1
echo "exit $?" >> $OUT/run7/step.txt; grep -v Warn $OUT/run7/step.txt
timeout 150 python3 benchmarks/results/2026-12-02-h200-s/run8_fp8_roles_vs_bf16.py > $OUT/run8/roles.txt 2>&1
echo "exit $?" >> $OUT/run8/roles.txt; grep -v Warn $OUT/run8/roles.txt | grep -v "^$"
