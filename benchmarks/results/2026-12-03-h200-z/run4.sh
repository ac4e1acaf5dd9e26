#!/bin/bash
# Run 4 (GPU only): the ws tests on the GPU; the fp8 whole step with and without GemmConfig.ws
# and the store roles alone (run4_fp8_step.py); the fp8_block sweep of the spec's three keys
# with the ws candidate, exported; Nsight Compute of the ws kernel; the BLOCK_N 256 probe.   OUT=... bash benchmarks/results/2026-12-03-h200-z/run4.sh
set -u
cd "$(dirname "$0")/../../.."
R=benchmarks/results/2026-12-03-h200-z
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-z4
mkdir -p $OUT/run4
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run4/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run4/gpu.txt
timeout 90 python3 -m pytest -q -x -p no:cacheprovider tests/test_grouped_mlp_ws.py > $OUT/run4/pytest-ws.txt 2>&1
echo "exit $?" >> $OUT/run4/pytest-ws.txt; tail -3 $OUT/run4/pytest-ws.txt
timeout 230 python3 $R/run4_fp8_step.py > $OUT/run4/step.txt 2>&1; echo "exit $?" >> $OUT/run4/step.txt
cat $OUT/run4/step.txt
timeout 170 python3 -m tilefuse.cli tune --op grouped_glu_mlp --dtype fp8_block --shape 8x16384x4096x3584 \
  --shape 64x32768x2048x1408 --shape 128x65536x2048x768 --force --rounds 6 --no-progress > $OUT/run4/tune-fp8.txt 2>&1
echo "tune exit $?" >> $OUT/run4/tune-fp8.txt
python3 -m tilefuse.cli tune --export-builtin $OUT/run4 >> $OUT/run4/tune-fp8.txt 2>&1
grep -v Warn $OUT/run4/tune-fp8.txt | tail -30
timeout 60 ncu --clock-control none --kernel-name regex:"fp8_ws_gemm|grouped_gemm" \
  --section SpeedOfLight --section Occupancy --section WarpStateStats --section SchedulerStats \
  --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis python3 $R/run3_fp8_ws.py --ncu > $OUT/run4/ncu.txt 2>&1
echo "exit $?" >> $OUT/run4/ncu.txt
grep -E "fp8_ws_gemm|grouped_gemm|Duration|DRAM Throughput|L2 Cache Throughput|L1/TEX Cache|Issue Slots|Tensor|Eligible|Warp Cycles Per Issued|exit" $OUT/run4/ncu.txt | head -40
# what is left of the call: the BLOCK_N 256 probe (prepared for the next run if cut)
timeout 60 python3 $R/run3_fp8_ws.py --wide > $OUT/run4/ws-wide.txt 2>&1; echo "exit $?" >> $OUT/run4/ws-wide.txt
cat $OUT/run4/ws-wide.txt
