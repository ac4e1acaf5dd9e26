#!/bin/bash
# Run 1 (GPU; prepared, not yet run; any Hopper card): the test files this folder's session
# changed (the quantizers' sm_90 compile test, CPU-bound, left to the CPU suite), on the GPU, where their kernels compile and their custom ops, plans and streams run
# as on a user's machine; then `tilefuse check --quick` (verification with NaN-poisoned
# allocations on every op, and the quick benchmarks: failed tilefuse rows fail it).
#   OUT=... bash benchmarks/results/2026-12-05-h200-au/run1.sh     (carry .whl: hypothesis)
set -u
cd "$(dirname "$0")/../../.."
mkdir -p $OUT/run1
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH} TILEFUSE_CACHE_DIR=$PWD/.tfcache-au1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/run1/gpu.txt
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" >> $OUT/run1/gpu.txt
timeout 360 python3 -m pytest -q -p no:cacheprovider \
    tests/test_devices.py tests/test_grouped_plan.py tests/test_grouped_mlp_api.py tests/test_so2_api.py \
    tests/test_so2_backward_weights.py tests/test_check.py tests/test_tuning_sweep.py tests/test_expert_parallel.py \
    tests/test_grouped_mlp_module_compat.py tests/test_quant_kernels.py tests/test_quant_api.py \
    tests/test_tensor_kinds.py tests/test_dyt_functorch.py tests/test_nn_dyt_fixes.py tests/test_nn_torch_compat.py \
    tests/test_hf_adapter.py tests/test_tuning_dyt.py \
    tests/test_grouped_mlp_recipes.py::test_a_recipe_without_a_backward_quantizes_only_what_the_forward_reads \
    --deselect tests/test_quant_kernels.py::test_kernels_compile_for_sm90 \
    > $OUT/run1/pytest.txt 2>&1
echo "pytest exit $? at ${SECONDS}s" >> $OUT/run1/pytest.txt
grep -E "FAILED|ERROR|passed|failed" $OUT/run1/pytest.txt | tail -15
timeout 200 python3 -m tilefuse.cli check --quick --no-progress --out $OUT/run1/check > $OUT/run1/check.txt 2>&1
echo "check exit $? at ${SECONDS}s" >> $OUT/run1/check.txt
tail -25 $OUT/run1/check.txt
