#!/bin/bash
# Run 29 (GPU, any Hopper card): the ws dGLU epilogue with SwiGLU's whole-tile z loaded at once
# (01eb86d's edits applied to a copy of the module): run29_dglu_whole.py, the launch against the
# package's module, with bit checks against the Triton launch. With TESTS=1 first
# tests/test_grouped_mlp_ws.py's dGLU and sm_90 compile tests (of the package's module).
#   OUT=... [LIMIT=seconds, default 585] bash benchmarks/results/2026-12-07-h200-bf/run29.sh
set -u
cd "$(dirname "$0")/../../.."
mkdir -p $OUT/run29
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader > $OUT/run29/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run29/gpu.txt
cat $OUT/run29/gpu.txt
if [ "${TESTS:-0}" = 1 ]; then
python3 -m pip install --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  > $OUT/run29/pip.txt 2>&1
PYTHONPATH=/tmp/site:$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d) timeout $(( ${LIMIT:-585} / 2 )) \
  python3 -m pytest -q -p no:cacheprovider -n 6 -rfs tests/test_grouped_mlp_ws.py -k "dglu or compiles" \
  > $OUT/run29/tests.txt 2>&1
echo "exit $? at ${SECONDS}s" >> $OUT/run29/tests.txt
tail -n 4 $OUT/run29/tests.txt | cut -c1-300
fi
PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d) timeout $(( ${LIMIT:-585} - SECONDS - 5 )) \
  python3 benchmarks/results/2026-12-07-h200-bf/run29_dglu_whole.py --rounds ${ROUNDS:-5} --shapes ${SHAPES:-1,2,3} > $OUT/run29/ab.txt 2>&1
echo "exit $? at ${SECONDS}s" >> $OUT/run29/ab.txt
grep -v "^ *$" $OUT/run29/ab.txt | grep -v Warn | cut -c1-170
