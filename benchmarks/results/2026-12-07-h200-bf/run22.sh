#!/bin/bash
# Run 22 (GPU; what it runs depends on the card that comes):
#   an H200: run 19's H200 part (the H200 table's fp8 halves sweeps and so2's 2x64 level-3 key);
#   another card (an H100): tests/test_grouped_mlp_ws.py whole on this tree (the ws kernel's last
#     edits, 0ca76a1 and ea82762, compiled by triton 3.8 only so far), then Nsight Compute on
#     fp8_block's four ws GEMM launches of one step at shape 2 (run22_ncu_ws.py).
#   OUT=... bash benchmarks/results/2026-12-07-h200-bf/run22.sh
set -u
cd "$(dirname "$0")/../../.."
mkdir -p $OUT/run22
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader > $OUT/run22/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run22/gpu.txt
cat $OUT/run22/gpu.txt
if grep -q H200 $OUT/run22/gpu.txt; then
  OUT=$OUT bash benchmarks/results/2026-12-07-h200-bf/run19.sh
  exit
fi
python3 -m pip install --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  > $OUT/run22/pip.txt 2>&1
PYTHONPATH=/tmp/site:$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d) timeout 300 python3 -m pytest -q \
  -p no:cacheprovider -n 4 -rfs tests/test_grouped_mlp_ws.py > $OUT/run22/tests.txt 2>&1
echo "exit $? at ${SECONDS}s" >> $OUT/run22/tests.txt
tail -n 4 $OUT/run22/tests.txt | cut -c1-300
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d)
timeout $((585 - SECONDS)) ncu --clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis \
  --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats \
  --kernel-name regex:fp8_ws_gemm_kernel --launch-skip 8 --launch-count 4 \
  python3 benchmarks/results/2026-12-07-h200-bf/run22_ncu_ws.py > $OUT/run22/ncu.txt 2>&1
echo "exit $? at ${SECONDS}s" >> $OUT/run22/ncu.txt
grep -E "^  [a-z_0-9]+kernel|^step|Duration|Throughput|Hit Rate|Issued|Eligible|Registers|exit" \
  $OUT/run22/ncu.txt | cut -c1-130 | head -80
