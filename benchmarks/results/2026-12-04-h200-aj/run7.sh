#!/bin/bash
# Run 7 (GPU; prepared for the next session: this session's device time was spent): the kernels
# route's launches through SpecializingLaunchers (grouped_gemm_kernel, grouped_wgrad_kernel,
# fp8_block_kernel, fp8_ws_gemm_kernel; they went through Triton's JIT on every call). First
# replay_gaps.py (run 4's measurement: eager step time and the GPU's idle time a step, against
# run 4's fp8_block 6.841 / 4.438 / 5.191 ms eager with 0.73 / 1.65 / 1.31 ms idle); fp8_block
# against bf16 tilefuse as called in the harness's sustained mode (--sustained: 2 s blocks, three
# rounds; against run 6's 1.07-1.09x / 0.82-0.83x / 0.77-0.79x); then the GPU tests of every file
# whose launches changed and of the timer's settle.
#   OUT=... bash benchmarks/results/2026-12-04-h200-aj/run7.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d)
mkdir -p $OUT/run7
timeout 120 python3 benchmarks/results/2026-12-04-h200-aj/replay_gaps.py > $OUT/run7/gaps.txt 2>&1
echo "exit $?" >> $OUT/run7/gaps.txt
grep -E "^shape|^ [a-z0-9_]+: graph|  (graph replay|eager):" $OUT/run7/gaps.txt
timeout 150 python3 benchmarks/grouped_compose_gpu_check.py --providers "tilefuse,fp8_block" --interleaves 32 \
  --sustained --rounds 3 --profile none > $OUT/run7/sustained.txt 2>&1; echo "exit $?" >> $OUT/run7/sustained.txt
grep -v "^  *$" $OUT/run7/sustained.txt | grep -v PASS | tail -16
timeout 300 python3 -m pytest -q -p no:cacheprovider -rfs --tb=short tests/test_grouped_mlp_kernels.py \
  tests/test_grouped_mlp_recipes.py tests/test_grouped_mlp_ws.py tests/test_quant_kernels.py \
  tests/test_specializing_launcher.py tests/test_tuning_gpu.py -k "not compiles" > $OUT/run7/pytest.txt 2>&1
echo "exit $?" >> $OUT/run7/pytest.txt
grep -E "^(FAILED|ERROR)" $OUT/run7/pytest.txt | head -20; tail -2 $OUT/run7/pytest.txt
