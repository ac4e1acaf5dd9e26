#!/bin/bash
# Run 7 (GPU; prepared for a later session: -aj's device time was spent, and the next
# session's first call found the machine unanswering, then no machine lent): the kernels
# route's launches through SpecializingLaunchers (grouped_gemm_kernel, grouped_wgrad_kernel,
# fp8_block_kernel, fp8_ws_gemm_kernel; they went through Triton's JIT on every call). First
# replay_gaps.py (run 4's measurement: eager step time and the GPU's idle time a step, against
# run 4's fp8_block 6.841 / 4.438 / 5.191 ms eager with 0.73 / 1.65 / 1.31 ms idle); then the
# compiled composition, bf16 tilefuse and fp8_block as called, in one process, interleaved
# (~25 ms samples) and then sustained (2 s blocks; --sustained prints both tables), beside
# nvidia-smi's SM clock and power: is tilefuse's lead over `_grouped_mm` + torch.compile, and
# fp8_block's over bf16 (run 6: 1.07-1.09x / 0.82-0.83x / 0.77-0.79x), the same at each
# provider's own clock? Run 8 has the GPU tests of the changed launch paths.
#   OUT=... bash benchmarks/results/2026-12-04-h200-aj/run7.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d)
mkdir -p $OUT/run7
timeout 120 python3 benchmarks/results/2026-12-04-h200-aj/replay_gaps.py > $OUT/run7/gaps.txt 2>&1
echo "exit $?" >> $OUT/run7/gaps.txt
grep -E "^shape|^ [a-z0-9_]+: graph|  (graph replay|eager):" $OUT/run7/gaps.txt
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,clocks_throttle_reasons.active --format=csv,noheader \
  -lms 200 > $OUT/run7/smi.csv 2>&1 &
SMI=$!
timeout 360 python3 benchmarks/grouped_compose_gpu_check.py --providers "compiled composition,tilefuse,fp8_block" \
  --interleaves 32 --sustained --rounds 3 --profile none > $OUT/run7/sustained.txt 2>&1
echo "exit $?" >> $OUT/run7/sustained.txt
kill $SMI
grep -E "^shape|compiled|  tilefuse|fp8_block|interleaved|sustained|exit" $OUT/run7/sustained.txt | grep -v PASS | tail -24
