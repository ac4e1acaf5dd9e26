#!/bin/bash
# Run 14 (GPU, any Hopper card): Nsight Compute on fp8_block's dW1 at shape 2, the op's Triton
# wgrad and run 8's best Gluon form (run14_ncu_wgrad.py): speed of light, memory workload, warp
# stall reasons, scheduler statistics, occupancy.
#   OUT=... bash benchmarks/results/2026-12-07-h200-bf/run14.sh
set -u
cd "$(dirname "$0")/../../.."
mkdir -p $OUT/run14
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader > $OUT/run14/gpu.txt
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d)
timeout 170 ncu --clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats \
  --section SchedulerStats --section Occupancy --section LaunchStats \
  --kernel-name regex:"grouped_wgrad_kernel|pingpong_fp8_wgrad_kernel" --launch-skip 2 --launch-count 2 \
  python3 benchmarks/results/2026-12-07-h200-bf/run14_ncu_wgrad.py > $OUT/run14/ncu.txt 2>&1
echo "exit $? at ${SECONDS}s" >> $OUT/run14/ncu.txt
grep -E "^  [a-z_]+kernel|Duration|Throughput|Stall|Issued|Eligible|Active Warps|No Eligible|Registers|bitwise|exit" \
  $OUT/run14/ncu.txt | cut -c1-130 | head -80
