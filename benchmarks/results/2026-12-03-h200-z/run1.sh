#!/bin/bash
# Run 1 (GPU only): the exact layer GEMM persistent (run1_exact_persistent.py): every mode
# bitwise, the backward GEMM pairs, Nsight Compute of one m = 1 pass, the whole exact step;
# then 2026-12-03-h200-y's prepared run 8 (the producer-warp fault bisected).
#   OUT=... bash benchmarks/results/2026-12-03-h200-z/run1.sh
set -u
cd "$(dirname "$0")/../../.."
R=benchmarks/results/2026-12-03-h200-z
mkdir -p $OUT/run1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run1/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run1/gpu.txt
export PYTHONUNBUFFERED=1 PYTHONPATH=src
timeout 120 python3 $R/run1_exact_persistent.py --modes > $OUT/run1/modes.txt 2>&1; echo "exit $?" >> $OUT/run1/modes.txt
tail -4 $OUT/run1/modes.txt
timeout 150 python3 $R/run1_exact_persistent.py --pairs > $OUT/run1/pairs.txt 2>&1; echo "exit $?" >> $OUT/run1/pairs.txt
cat $OUT/run1/pairs.txt
timeout 80 ncu --clock-control none --kernel-name regex:"so2_gemm" \
  --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats \
  --section MemoryWorkloadAnalysis --section InstructionStats --section ComputeWorkloadAnalysis \
  python3 $R/run1_exact_persistent.py --ncu > $OUT/run1/ncu.txt 2>&1
echo "exit $?" >> $OUT/run1/ncu.txt
grep -E "so2_gemm|Duration|DRAM Throughput|Achieved Occupancy|Registers Per|Issued Warp|No Eligible|Warp Cycles Per Issued|L2 Cache Throughput|Executed Instructions  |FMA|exit" $OUT/run1/ncu.txt | head -60
timeout 200 python3 $R/run1_exact_persistent.py --step > $OUT/run1/step.txt 2>&1; echo "exit $?" >> $OUT/run1/step.txt
cat $OUT/run1/step.txt
OUT=$OUT bash benchmarks/results/2026-12-03-h200-y/run8.sh
