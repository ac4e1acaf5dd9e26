#!/bin/bash
# Run 7 (GPU; prepared for the next session: this session's device time was spent): the kernels
# route's launches through SpecializingLaunchers (grouped_gemm_kernel, grouped_wgrad_kernel,
# fp8_block_kernel, fp8_ws_gemm_kernel; they went through Triton's JIT on every call). First
# replay_gaps.py (run 4's measurement: eager step time and the GPU's idle time a step, against
# run 4's fp8_block 6.841 / 4.438 / 5.191 ms eager with 0.73 / 1.65 / 1.31 ms idle), then the GPU
# tests of every file whose launches changed.
#   OUT=... bash benchmarks/results/2026-12-04-h200-aj/run7.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d)
mkdir -p $OUT/run7
timeout 120 python3 benchmarks/results/2026-12-04-h200-aj/replay_gaps.py > $OUT/run7/gaps.txt 2>&1
echo "exit $?" >> $OUT/run7/gaps.txt
grep -E "^shape|^ [a-z0-9_]+: graph|  (graph replay|eager):" $OUT/run7/gaps.txt
timeout 420 python3 -m pytest -q -p no:cacheprovider -rfs --tb=short tests/test_grouped_mlp_kernels.py \
  tests/test_grouped_mlp_recipes.py tests/test_grouped_mlp_ws.py tests/test_quant_kernels.py \
  tests/test_specializing_launcher.py -k "not compiles" > $OUT/run7/pytest.txt 2>&1
echo "exit $?" >> $OUT/run7/pytest.txt
grep -E "^(FAILED|ERROR)" $OUT/run7/pytest.txt | head -20; tail -2 $OUT/run7/pytest.txt
