#!/bin/bash
# Run 18 (GPU, any Hopper card): run 17 again with the ws dGLU's F mended (the halves path
# read z's up columns and wrote dz's F / 2 after the gate ones: the launch handed the kernel
# N / 2 for F, right for fc1's N = 2F only).
#   1. the failing tests of run 17 and every other dGLU / whole-step test of the file;
#   2. run17_halves.py: bits of the whole fp8 step between the three configs, then time;
#   3. fp8_block swept at the spec's three shapes in the halves layout (SwiGLU, no bias), the
#      table exported after it (keys merged into this card's built-in table by hand).
#   OUT=... [PART=tests|probe|sweep: from that part on] bash benchmarks/results/2026-12-07-h200-bf/run18.sh
set -u
cd "$(dirname "$0")/../../.."
mkdir -p $OUT/run18
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader > $OUT/run18/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run18/gpu.txt
cat $OUT/run18/gpu.txt
python3 -m pip install --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  > $OUT/run18/pip.txt 2>&1
P=${PART:-tests}
if [ $P = tests ]; then
PYTHONPATH=/tmp/site:$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d) timeout 200 python3 -m pytest -q -p no:cacheprovider \
  -n 4 -rfs tests/test_grouped_mlp_ws.py -k "dglu or triton_kernels_bits or glu_with_every" > $OUT/run18/tests.txt 2>&1
echo "exit $? at ${SECONDS}s" >> $OUT/run18/tests.txt
tail -3 $OUT/run18/tests.txt | cut -c1-300
P=probe
fi
if [ $P = probe ]; then
PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d) timeout 200 \
  python3 benchmarks/results/2026-12-07-h200-bf/run17_halves.py --shapes ${SHAPES:-1,2,3} --rounds ${ROUNDS:-5} \
  > $OUT/run18/halves.txt 2>&1
echo "exit $? at ${SECONDS}s" >> $OUT/run18/halves.txt
grep -E "bits|BITS|^shape|x bf16|faster|exit" $OUT/run18/halves.txt | cut -c1-170
P=sweep
fi
export PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-bf18
for s in 8x16384x4096x3584-s0 64x32768x2048x1408-s0 128x65536x2048x768-s0; do
  [ $SECONDS -gt 480 ] && { echo "no time left for $s" >> $OUT/run18/tune.txt; continue; }
  timeout $((585 - SECONDS)) python3 -m tilefuse.cli tune --op grouped_glu_mlp --shape $s --dtype fp8_block --force \
    --no-progress >> $OUT/run18/tune.txt 2>&1
  echo "tune $s exit $? at ${SECONDS}s" >> $OUT/run18/tune.txt
done
python3 -m tilefuse.cli tune --export-builtin $OUT/run18 > /dev/null 2>&1
grep -E "^grouped_glu_mlp  |exit|no time" $OUT/run18/tune.txt | cut -c1-220
