#!/bin/bash
# Run 5 (GPU, prepared; any Hopper card; carry .whl): this session's changes on the GPU.
# (1) The test files they touched, and run 1's six failures, in 10 pytest-xdist workers;
# (2) so2_peers.py at (6, 96) / (6, 128), tilefuse against torch.compile, 7 rounds: the
# composition route's in-place layer GEMMs against run 4's numbers; (3) `tilefuse bench --ops
# grouped_glu_mlp --quick`: the recipe rows as called, over the bf16 op as called.
#   OUT=... bash benchmarks/results/2026-12-06-h200-aw/run5.sh
set -u
cd "$(dirname "$0")/../../.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src
mkdir -p $OUT/run5
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/run5/gpu.txt
timeout -s INT -k 20 240 python3 -m pytest -q -rfE --tb=short -p no:cacheprovider -n 10 \
    tests/test_so2_compose.py tests/test_so2_kernels.py tests/test_so2_api.py tests/test_grouped_compose.py \
    tests/test_check.py tests/test_grouped_mlp_recipes.py tests/test_cli_packaging.py tests/test_quant_api.py \
    tests/test_tuning_sweep.py tests/test_tuning_robustness.py tests/test_nn_dyt_fixes.py tests/test_expert_parallel.py \
    > $OUT/run5/pytest.txt 2>&1
echo "pytest exit $? at ${SECONDS}s" >> $OUT/run5/pytest.txt
grep -E "^(FAILED|ERROR)|passed|failed|pytest exit" $OUT/run5/pytest.txt | tail -15
TILEFUSE_CACHE_DIR=$(mktemp -d) timeout 120 python3 benchmarks/so2_peers.py --shapes 65536:6:96,65536:6:128 --rounds 7 \
  --target-ms 50 --peers tilefuse,compile --json $OUT/run5/peers.json 2>&1 | grep -v Warn > $OUT/run5/peers.txt
echo "exit ${PIPESTATUS[0]} at ${SECONDS}s" >> $OUT/run5/peers.txt
grep -E "^\| 65536|^exit" $OUT/run5/peers.txt
TILEFUSE_CACHE_DIR=$(mktemp -d) timeout 150 python3 -m tilefuse.cli bench --quick --no-progress --ops grouped_glu_mlp \
  --out $OUT/run5/grouped > $OUT/run5/bench-grouped.txt 2>&1
echo "exit $? at ${SECONDS}s" >> $OUT/run5/bench-grouped.txt
grep -E "fp8_block|as called\) \||compose route \||^exit" $OUT/run5/bench-grouped.txt | cut -c1-200 | head -12
