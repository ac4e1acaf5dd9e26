#!/bin/bash
# Run 1: the dyt bf16 persistent-grid probe and Nsight Compute of the bf16 forward at 1024 and
# 256 columns (issue 17); the so2 non-GEMM kernels' launch shapes at the three benchmark shapes
# (issue 15).   OUT=... bash benchmarks/results/2026-12-02-h200-n/run1.sh
set -u
cd "$(dirname "$0")/../../.."
here=benchmarks/results/2026-12-02-h200-n
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a $OUT/gpu.txt
timeout 240 python3 $here/run1_dyt_probe.py 2>&1 | grep -v Warn | tee $OUT/dyt_probe.txt | grep -A6 "^bf16"
for w in 1024 256; do
  timeout 60 ncu --clock-control none -k regex:dyt_fwd --launch-skip 1 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section Occupancy --section LaunchStats \
    --section MemoryWorkloadAnalysis --section SchedulerStats \
    python3 $here/run1_dyt_probe.py --ncu $w > $OUT/ncu-fwd-$w.txt 2>&1; echo "ncu exit $?" >> $OUT/ncu-fwd-$w.txt
  grep -E "Duration|DRAM Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per|Issued Warp|No Eligible|Block Limit" \
    $OUT/ncu-fwd-$w.txt | head -14
done
for s in 647000:3:32 300000:6:32 400000:2:64; do
  IFS=: read e l c <<< "$s"
  RUN_E=$e RUN_LMAX=$l RUN_CF=$c timeout 80 python3 $here/run1_so2_aux.py > $OUT/so2_aux_$e.txt 2>&1
  echo "aux exit $?" >> $OUT/so2_aux_$e.txt
done
