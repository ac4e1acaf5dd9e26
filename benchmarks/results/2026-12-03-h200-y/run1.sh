#!/bin/bash
# Run 1 (GPU only): the persistent level-3 wgmma GEMM (run1_persistent.py): the backward GEMM pair
# timed and checked bitwise, Nsight Compute of one m = 1 pass (shipped and persistent), every mode
# bitwise, then the whole level-3 step.   OUT=... bash benchmarks/results/2026-12-03-h200-y/run1.sh
set -u
cd "$(dirname "$0")/../../.."
R=benchmarks/results/2026-12-03-h200-y
mkdir -p $OUT/run1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run1/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run1/gpu.txt
export PYTHONUNBUFFERED=1 PYTHONPATH=src
timeout 170 python3 $R/run1_persistent.py --pairs > $OUT/run1/pairs.txt 2>&1; echo "exit $?" >> $OUT/run1/pairs.txt
cat $OUT/run1/pairs.txt
timeout 80 ncu --clock-control none --kernel-name regex:"so2_gemm3x_wgmma_kernel|gemm3x_persistent_kernel" \
  --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats \
  --section MemoryWorkloadAnalysis python3 $R/run1_persistent.py --ncu > $OUT/run1/ncu.txt 2>&1
echo "exit $?" >> $OUT/run1/ncu.txt
grep -E "gemm3x|Duration|DRAM Throughput|Achieved Occupancy|Registers Per|Issued Warp|No Eligible|Eligible Warps|Warp Cycles Per Issued|L2 Cache Throughput|exit" $OUT/run1/ncu.txt | head -40
timeout 120 python3 $R/run1_persistent.py --modes > $OUT/run1/modes.txt 2>&1; echo "exit $?" >> $OUT/run1/modes.txt
tail -5 $OUT/run1/modes.txt
timeout 180 python3 $R/run1_persistent.py --step > $OUT/run1/step.txt 2>&1; echo "exit $?" >> $OUT/run1/step.txt
cat $OUT/run1/step.txt
