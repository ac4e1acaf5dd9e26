#!/bin/bash
# Run 2 (GPU; any Hopper card): the fixes of this session and of -au (prepared there, never run:
# no device was lent) on a GPU. The test files either session changed (the quantizers' sm_90
# compile test, CPU-bound, left to the CPU suite), where their kernels compile and their custom
# ops, plans, streams and compiled graphs run as on a user's machine; then `tilefuse check
# --quick` (every op verified with NaN-poisoned allocations, and the quick benchmarks; a failed
# tilefuse row fails it).
#   OUT=... bash benchmarks/results/2026-12-05-h200-av/run2.sh     (carry .whl: hypothesis)
set -u
cd "$(dirname "$0")/../../.."
mkdir -p $OUT/run2
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH} TILEFUSE_CACHE_DIR=$PWD/.tfcache-av2
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/run2/gpu.txt
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" >> $OUT/run2/gpu.txt
timeout 400 python3 -m pytest -q -p no:cacheprovider -o faulthandler_timeout=120 \
    tests/test_devices.py tests/test_so2_api.py tests/test_so2_kernels.py tests/test_so2_level3.py \
    tests/test_so2_backward_weights.py tests/test_so2_forward_key.py tests/test_dyt.py tests/test_dyt_lean.py \
    tests/test_dyt_functorch.py tests/test_nn_dyt_fixes.py tests/test_quant_api.py tests/test_quant_kernels.py \
    tests/test_grouped_mlp_api.py tests/test_grouped_plan.py tests/test_grouped_compose.py tests/test_hf_adapter.py \
    tests/test_expert_parallel.py tests/test_tensor_kinds.py tests/test_tuning_sweep.py tests/test_tuning_dyt.py \
    tests/test_nn_torch_compat.py tests/test_grouped_mlp_module_compat.py tests/test_check.py \
    tests/test_grouped_mlp_recipes.py \
    --deselect tests/test_quant_kernels.py::test_kernels_compile_for_sm90 \
    > $OUT/run2/pytest.txt 2>&1
echo "pytest exit $? at ${SECONDS}s" >> $OUT/run2/pytest.txt
grep -E "FAILED|ERROR|passed|failed" $OUT/run2/pytest.txt | tail -15
timeout $((585 - SECONDS)) python3 -m tilefuse.cli check --quick --no-progress --out $OUT/run2/check > $OUT/run2/check.txt 2>&1
echo "check exit $? at ${SECONDS}s" >> $OUT/run2/check.txt
tail -25 $OUT/run2/check.txt
