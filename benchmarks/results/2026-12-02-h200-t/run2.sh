#!/bin/bash
# Run 2 (GPU only): run2_fp8_promotion_cost.py timed, then under Nsight Compute (three kernels
# at shape 2's fc1).   OUT=... bash benchmarks/results/2026-12-02-h200-t/run2.sh
set -u
cd "$(dirname "$0")/../../.."
mkdir -p $OUT/run2
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run2/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run2/gpu.txt
S=benchmarks/results/2026-12-02-h200-t/run2_fp8_promotion_cost.py
PYTHONUNBUFFERED=1 PYTHONPATH=src timeout 200 python3 $S > $OUT/run2/time.txt 2>&1; echo "exit $?" >> $OUT/run2/time.txt
cat $OUT/run2/time.txt
PYTHONPATH=src timeout 240 ncu --clock-control none -k regex:fp8_gemm --section SpeedOfLight --section WarpStateStats \
  --section ComputeWorkloadAnalysis --section Occupancy --section SchedulerStats python3 $S ncu \
  > $OUT/run2/ncu.txt 2>&1; echo "exit $?" >> $OUT/run2/ncu.txt
grep -E "fp8_gemm|Throughput|Pipe|Stall|Issue|Eligible|Occupancy|Registers|exit|Block Limit|Warp Cycles" $OUT/run2/ncu.txt | head -90
