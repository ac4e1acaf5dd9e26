#!/bin/bash
# Run 27 (GPU, any Hopper card): Nsight Compute on the fc2 dgrad + dGLU at shape 2, the ws launch
# and run 26's out-of-phase form (run27_ncu_dglu.py); then run 22's Nsight Compute of the four ws
# launches of fp8_block's step at shape 2 (run22_ncu_ws.py) in the time left.
#   OUT=... [LIMIT=seconds, default 585] bash benchmarks/results/2026-12-07-h200-bf/run27.sh
set -u
cd "$(dirname "$0")/../../.."
mkdir -p $OUT/run27
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader > $OUT/run27/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run27/gpu.txt
cat $OUT/run27/gpu.txt
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d)
SECTIONS="--section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
  --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats"
timeout $(( ${LIMIT:-585} / 2 )) ncu --clock-control none $SECTIONS \
  --kernel-name regex:"fp8_ws_gemm_kernel|pp_dglu_kernel" --launch-skip 2 --launch-count 2 \
  python3 benchmarks/results/2026-12-07-h200-bf/run27_ncu_dglu.py > $OUT/run27/ncu_dglu.txt 2>&1
echo "exit $? at ${SECONDS}s" >> $OUT/run27/ncu_dglu.txt
timeout $(( ${LIMIT:-585} - SECONDS - 5 )) ncu --clock-control none $SECTIONS \
  --kernel-name regex:fp8_ws_gemm_kernel --launch-skip 8 --launch-count 4 \
  python3 benchmarks/results/2026-12-07-h200-bf/run22_ncu_ws.py > $OUT/run27/ncu_ws.txt 2>&1
echo "exit $? at ${SECONDS}s" >> $OUT/run27/ncu_ws.txt
for f in ncu_dglu ncu_ws; do
  grep -E "^  [a-z_0-9]+kernel|bitwise|^step|Duration|Throughput|Pipe|Issue Slots|Issued|Eligible|Registers|exit" \
    $OUT/run27/$f.txt | cut -c1-130 | head -70
done
