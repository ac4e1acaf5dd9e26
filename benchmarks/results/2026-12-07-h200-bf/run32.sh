#!/bin/bash
# Run 32 (GPU, any Hopper card; carry .whl): run32_dglu_halves.py, the ws dGLU's whole-tile z for
# SwiGLU in the halves layout too, against the package's module (bits against the Triton launch,
# then the launch timed); then the same one-line edit made in the tree's ws_kernels.py and
# tests/test_grouped_mlp_ws.py -k "dglu or compiles" run on it.
#   OUT=... [LIMIT=seconds, default 470] bash benchmarks/results/2026-12-07-h200-bf/run32.sh
set -u
cd "$(dirname "$0")/../../.."
mkdir -p $OUT/run32
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader > $OUT/run32/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run32/gpu.txt
cat $OUT/run32/gpu.txt
PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d) timeout $(( ${LIMIT:-470} / 2 )) \
  python3 benchmarks/results/2026-12-07-h200-bf/run32_dglu_halves.py --rounds ${ROUNDS:-5} --shapes ${SHAPES:-1,2,3} \
  > $OUT/run32/ab.txt 2>&1
echo "exit $? at ${SECONDS}s" >> $OUT/run32/ab.txt
grep -v "^ *$" $OUT/run32/ab.txt | grep -v Warn | cut -c1-170
python3 -m pip install --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  > $OUT/run32/pip.txt 2>&1
sed -i 's/WHOLE: gl.constexpr = ACT == SWIGLU and INTERLEAVE != 0/WHOLE: gl.constexpr = ACT == SWIGLU/' \
  src/tilefuse/ops/grouped_glu_mlp/ws_kernels.py
grep -n "WHOLE: gl.constexpr" src/tilefuse/ops/grouped_glu_mlp/ws_kernels.py > $OUT/run32/tests.txt
PYTHONPATH=/tmp/site:$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d) timeout $(( ${LIMIT:-470} - SECONDS - 5 )) \
  python3 -m pytest -q -p no:cacheprovider -n 6 -rfs tests/test_grouped_mlp_ws.py -k "dglu or compiles" \
  >> $OUT/run32/tests.txt 2>&1
echo "exit $? at ${SECONDS}s" >> $OUT/run32/tests.txt
tail -n 4 $OUT/run32/tests.txt | cut -c1-300
