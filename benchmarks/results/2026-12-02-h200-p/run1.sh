#!/bin/bash
# Run 1: the so2 GEMMs' 1-D grid (a row block's column tiles adjacent) against the 2-D grid before
# it: the GEMM pairs and the whole op, old/new interleaved (run1_order_ab.py); Nsight Compute of one
# backward GEMM pair at Neo (run1_ncu.py); so2_peers.py against DeePMD-kit and torch.compile.
# Carry .whl (DeePMD-kit 3.2.0 and its pure-Python dependencies).
#   OUT=... bash benchmarks/results/2026-12-02-h200-p/run1.sh
set -u
cd "$(dirname "$0")/../../.."
here=benchmarks/results/2026-12-02-h200-p
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-p1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a $OUT/gpu.txt
timeout 200 python3 $here/run1_order_ab.py 2>&1 | grep -v Warn | tee $OUT/order_ab.txt
timeout 120 ncu --clock-control none --profile-from-start off -k regex:so2_gemm_kernel \
  --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
  --section SchedulerStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis \
  python3 $here/run1_ncu.py > $OUT/ncu.txt 2>&1
echo "ncu exit $?" >> $OUT/ncu.txt
grep -E "so2_gemm_kernel|Duration|DRAM Throughput|Compute \(SM\) Throughput|Registers Per|Achieved Occupancy|Theoretical Occ|Issued Warp Per|No Eligible|L2 Hit|Executed Ipc A|Warp Cycles Per Issued|One or More" $OUT/ncu.txt | head -80
timeout 230 python3 benchmarks/so2_peers.py --shapes 647000:3:32,300000:6:32,400000:2:64 --rounds 4 \
  --deepmd-tiles h20 --peers tilefuse,tilefuse-l3,compile,deepmd,deepmd-fp16x3 --json $OUT/peers.json 2>&1 \
  | grep -v Warn | tail -19 | tee $OUT/peers.txt
