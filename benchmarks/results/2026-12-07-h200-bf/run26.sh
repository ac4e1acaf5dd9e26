#!/bin/bash
# Run 26 (GPU, any Hopper card): the GeGLU form of the ws dGLU epilogue (4915796, never run on a
# GPU) in tests/test_grouped_mlp_ws.py's dGLU and sm_90 compile tests; then run26_pingpong.py, the
# fc2 dgrad + dGLU with its consumer warp groups out of phase (bits against the ws launch on
# small ragged problems and at the spec's shapes, the launch timed against the ws and Triton
# launches, the step as called with it).
#   OUT=... [LIMIT=seconds, default 585] bash benchmarks/results/2026-12-07-h200-bf/run26.sh
set -u
cd "$(dirname "$0")/../../.."
mkdir -p $OUT/run26
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader > $OUT/run26/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run26/gpu.txt
cat $OUT/run26/gpu.txt
python3 -m pip install --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  > $OUT/run26/pip.txt 2>&1
PYTHONPATH=/tmp/site:$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d) timeout $(( ${LIMIT:-585} * 4 / 10 )) \
  python3 -m pytest -q -p no:cacheprovider -n 6 -rfs tests/test_grouped_mlp_ws.py -k "dglu or compiles" > $OUT/run26/tests.txt 2>&1
echo "exit $? at ${SECONDS}s" >> $OUT/run26/tests.txt
tail -n 4 $OUT/run26/tests.txt | cut -c1-300
PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d) timeout $(( ${LIMIT:-585} - SECONDS - 5 )) \
  python3 benchmarks/results/2026-12-07-h200-bf/run26_pingpong.py --rounds ${ROUNDS:-4} > $OUT/run26/pingpong.txt 2>&1
echo "exit $? at ${SECONDS}s" >> $OUT/run26/pingpong.txt
grep -v "^ *$" $OUT/run26/pingpong.txt | grep -v Warn | cut -c1-170
