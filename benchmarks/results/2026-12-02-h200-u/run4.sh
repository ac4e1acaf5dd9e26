#!/bin/bash
# Run 4 (GPU only): run 3 again with the activation tile as wgmma's register operand (no A in shared memory), after all the
# fused kernel's tests.   OUT=... bash benchmarks/results/2026-12-02-h200-u/run4.sh
set -u
cd "$(dirname "$0")/../../.."
mkdir -p $OUT/run4
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run4/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run4/gpu.txt
PYTHONPATH=src timeout 200 python3 -m pytest -q -x -p no:cacheprovider tests/test_so2_wgmma.py \
  > $OUT/run4/pytest.txt 2>&1
echo "exit $?" >> $OUT/run4/pytest.txt
tail -3 $OUT/run4/pytest.txt
PYTHONUNBUFFERED=1 PYTHONPATH=src timeout 300 python3 benchmarks/results/2026-12-02-h200-u/run3_components.py \
  > $OUT/run4/components.txt 2>&1; echo "exit $?" >> $OUT/run4/components.txt
cat $OUT/run4/components.txt
# Nsight Compute of the two |m| = 1 passes at Neo (run3_ncu.py)
PYTHONPATH=src timeout 200 ncu --clock-control none --kernel-name regex:"so2_gemm3x_wgmma_kernel|so2_bwd_fused3x_wgmma_kernel" \
  --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis \
  python3 benchmarks/results/2026-12-02-h200-u/run3_ncu.py > $OUT/run4/ncu.txt 2>&1
echo "exit $?" >> $OUT/run4/ncu.txt
grep -E "so2_|Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Registers Per|Theoretical Occ|Stall|Issue Slots|Eligible|Block Limit|L2 Hit|L1/TEX Hit|exit" $OUT/run4/ncu.txt | head -60
