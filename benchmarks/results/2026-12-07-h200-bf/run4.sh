#!/bin/bash
# Run 4 (GPU, any Hopper card): fp8_block's fc2 dgrad + dGLU in the warp-specialised kernel.
# tests/test_grouped_mlp_ws.py (its GPU tests: the ws dGLU bitwise the Triton launch's dz and
# dz's fp8 copy, its partials to rounding, the whole op with ws configs; the sm_90 compile with
# this image's ptxas), 4 xdist workers; run4_dglu_role.py (the launch alone, Triton against ws
# at 4 and 5 slots, 3 shapes); run4_as_called_dglu.py (the op as called, 3 shapes, interleave 32,
# fp8_block with the ws dGLU and with the Triton dGLU beside bf16 tilefuse and the compiled
# composition, 5 interleaved rounds).
#   OUT=... [LIMIT=seconds, default 580] bash benchmarks/results/2026-12-07-h200-bf/run4.sh
set -u
cd "$(dirname "$0")/../../.."
D=benchmarks/results/2026-12-07-h200-bf
mkdir -p $OUT/run4
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader > $OUT/run4/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run4/gpu.txt
cat $OUT/run4/gpu.txt
python3 -m pip install --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  > $OUT/run4/pip.txt 2>&1
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d)
timeout 200 python3 -m pytest -q -p no:cacheprovider -n 4 -rfs tests/test_grouped_mlp_ws.py > $OUT/run4/tests.txt 2>&1
echo "exit $? at ${SECONDS}s" >> $OUT/run4/tests.txt
tail -6 $OUT/run4/tests.txt | cut -c1-300
export PYTHONPATH=$PWD/src
timeout 120 python3 $D/run4_dglu_role.py --rounds 5 > $OUT/run4/role.txt 2>&1
echo "exit $? at ${SECONDS}s" >> $OUT/run4/role.txt
cat $OUT/run4/role.txt | cut -c1-200
timeout $((${LIMIT:-580} - SECONDS)) python3 $D/run4_as_called_dglu.py --shapes 1,2,3 --interleaves 32 --rounds 5 \
  --providers "compiled composition,tilefuse,fp8_block" --profile none > $OUT/run4/steps.txt 2>&1
echo "exit $? at ${SECONDS}s" >> $OUT/run4/steps.txt
grep -E "ratios|shape|exit|Error" $OUT/run4/steps.txt | tail -20 | cut -c1-250
