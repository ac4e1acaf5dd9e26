#!/bin/bash
# Run 17 (GPU, any Hopper card): fp8_block's fc1 + GLU and fc2 dgrad + dGLU through the
# warp-specialised kernel in the halves layout (ws_kernels' halves path).
#   1. tests/test_grouped_mlp_ws.py whole (4 xdist workers): the halves path's bitwise tests
#      against the Triton launches, its sm_90 compile with triton 3.6 (no stack, the wgmma
#      schedule), and the rest of the file;
#   2. run17_halves.py: bits of the whole fp8 step between the ws config with and without the
#      ws GLU / dGLU and the heuristic, then their time at the spec's shapes beside the bf16 op
#      and fp8_block at interleave 32, as called.
#   OUT=... [PART=tests|probe] [SHAPES=1,2,3] [ROUNDS=5] bash benchmarks/results/2026-12-07-h200-bf/run17.sh
set -u
cd "$(dirname "$0")/../../.."
mkdir -p $OUT/run17
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader > $OUT/run17/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run17/gpu.txt
cat $OUT/run17/gpu.txt
python3 -m pip install --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  > $OUT/run17/pip.txt 2>&1
if [ "${PART:-tests}" = tests ]; then
PYTHONPATH=/tmp/site:$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d) timeout 260 python3 -m pytest -q -p no:cacheprovider \
  -n 4 -rfs tests/test_grouped_mlp_ws.py > $OUT/run17/tests.txt 2>&1
echo "exit $? at ${SECONDS}s" >> $OUT/run17/tests.txt
tail -4 $OUT/run17/tests.txt | cut -c1-300
fi
[ "${PART:-}" = tests ] && exit 0
PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d) timeout $((580 - SECONDS)) \
  python3 benchmarks/results/2026-12-07-h200-bf/run17_halves.py --shapes ${SHAPES:-1,2,3} --rounds ${ROUNDS:-5} \
  > $OUT/run17/halves.txt 2>&1
echo "exit $? at ${SECONDS}s" >> $OUT/run17/halves.txt
grep -v "^ *$" $OUT/run17/halves.txt | cut -c1-150 | tail -70
