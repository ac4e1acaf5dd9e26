#!/bin/bash
# Run 3: Nsight Compute of the trailing TMA roles and their CUTLASS peers (run3_ncu.py).
cd "$(dirname "$0")/../../.."
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 400 ncu --clock-control none --nvtx --nvtx-include "prof/" \
  --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats \
  --section SchedulerStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis \
  python3 benchmarks/results/2026-12-01-h200-l/run3_ncu.py > $OUT/ncu.txt 2>&1; echo "ncu exit $?" >> $OUT/ncu.txt
grep -E "role:|^  [a-z_].*\(|Duration|Registers Per|Achieved Occupancy|Compute \(SM\) Throughput|Memory Throughput|Issue Slots Busy|No Eligible|Local Memory|Stall|Warp Cycles Per Issued|Shared Memory Configuration Size|Dynamic Shared|Block Size|Grid Size|ncu exit" $OUT/ncu.txt | head -150
