#!/bin/bash
# Run 2 (GPU only): run 1's harness on the persistent kernel without divisions in its K loop
# (run2_persistent_cursor.py): GEMM pairs, Nsight Compute of one m = 1 pass, every mode bitwise,
# the whole level-3 step.   OUT=... bash benchmarks/results/2026-12-03-h200-y/run2.sh
set -u
cd "$(dirname "$0")/../../.."
R=benchmarks/results/2026-12-03-h200-y
mkdir -p $OUT/run2
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run2/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run2/gpu.txt
export PYTHONUNBUFFERED=1 PYTHONPATH=src
timeout 170 python3 $R/run2_persistent_cursor.py --pairs > $OUT/run2/pairs.txt 2>&1; echo "exit $?" >> $OUT/run2/pairs.txt
cat $OUT/run2/pairs.txt
timeout 80 ncu --clock-control none --kernel-name regex:"so2_gemm3x_wgmma_kernel|gemm3x_cursor_kernel" \
  --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats \
  --section MemoryWorkloadAnalysis --section InstructionStats python3 $R/run2_persistent_cursor.py --ncu > $OUT/run2/ncu.txt 2>&1
echo "exit $?" >> $OUT/run2/ncu.txt
grep -E "gemm3x|Duration|DRAM Throughput|Achieved Occupancy|Registers Per|Issued Warp|No Eligible|Warp Cycles Per Issued|L2 Cache Throughput|Executed Instructions  |exit" $OUT/run2/ncu.txt | head -40
timeout 120 python3 $R/run2_persistent_cursor.py --modes > $OUT/run2/modes.txt 2>&1; echo "exit $?" >> $OUT/run2/modes.txt
tail -3 $OUT/run2/modes.txt
timeout 200 python3 $R/run2_persistent_cursor.py --step > $OUT/run2/step.txt 2>&1; echo "exit $?" >> $OUT/run2/step.txt
cat $OUT/run2/step.txt
