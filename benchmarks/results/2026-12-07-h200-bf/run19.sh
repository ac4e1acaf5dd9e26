#!/bin/bash
# Run 19 (GPU; what it runs depends on the card that comes):
#   an H200: the H200 table's missing sweeps: fp8_block in the halves layout at the spec's three
#     shapes (as run 18 on the H100) and so2_mixing_stack's 2x64 level-3 key with the
#     weight-gradient validation (run 6's PART=sweep), the table exported after them;
#   another card (an H100): run19_as_called.py, the fp8 halves call through the op with the
#     table's new entries (launches and time), and `tilefuse check --quick --no-bench --ops
#     grouped_glu_mlp` (its warp-specialised rows now expect the halves layout's ws GLU / dGLU).
#   OUT=... bash benchmarks/results/2026-12-07-h200-bf/run19.sh
set -u
cd "$(dirname "$0")/../../.."
mkdir -p $OUT/run19
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader > $OUT/run19/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run19/gpu.txt
cat $OUT/run19/gpu.txt
if grep -q H200 $OUT/run19/gpu.txt; then
  export PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-bf19
  for s in 8x16384x4096x3584-s0 64x32768x2048x1408-s0 128x65536x2048x768-s0; do
    timeout $((250 - SECONDS)) python3 -m tilefuse.cli tune --op grouped_glu_mlp --shape $s --dtype fp8_block --force \
      --no-progress >> $OUT/run19/tune.txt 2>&1
    echo "tune $s exit $? at ${SECONDS}s" >> $OUT/run19/tune.txt
  done
  timeout $((585 - SECONDS)) python3 -m tilefuse.cli tune --op so2_mixing_stack --shape 2x64 --pass level3 --force \
    --no-progress >> $OUT/run19/tune.txt 2>&1
  echo "tune so2 2x64 level3 exit $? at ${SECONDS}s" >> $OUT/run19/tune.txt
  python3 -m tilefuse.cli tune --export-builtin $OUT/run19 > /dev/null 2>&1
  grep -E "^grouped_glu_mlp  |^so2_mixing_stack  |exit|weight" $OUT/run19/tune.txt | cut -c1-220
else
  PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d) timeout 300 \
    python3 benchmarks/results/2026-12-07-h200-bf/run19_as_called.py > $OUT/run19/as_called.txt 2>&1
  echo "exit $? at ${SECONDS}s" >> $OUT/run19/as_called.txt
  grep -v "^ *$" $OUT/run19/as_called.txt | grep -v Warn | cut -c1-170
  PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d) timeout $((585 - SECONDS)) python3 -m tilefuse.cli check --quick \
    --out $OUT/run19/check-report \
    --no-bench --ops grouped_glu_mlp --no-progress > $OUT/run19/check.txt 2>&1
  echo "exit $? at ${SECONDS}s" >> $OUT/run19/check.txt
  tail -6 $OUT/run19/check.txt | cut -c1-200
fi
