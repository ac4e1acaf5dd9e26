#!/bin/bash
# Run 23 (GPU, any Hopper card): the ws dGLU epilogue with each half's z loaded at once and dz's
# fp8 codes from registers. run23_dglu_batched.py first (the launch and the step as called,
# against the module before the change, with bit checks), then tests/test_grouped_mlp_ws.py's
# dGLU, bitwise and sm_90 compile tests (-k "dglu or compiles or bits") in the time left.
#   OUT=... [LIMIT=seconds, default 585] bash benchmarks/results/2026-12-07-h200-bf/run23.sh
set -u
cd "$(dirname "$0")/../../.."
mkdir -p $OUT/run23
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader > $OUT/run23/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run23/gpu.txt
cat $OUT/run23/gpu.txt
PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d) timeout $(( ${LIMIT:-585} * 6 / 10 )) \
  python3 benchmarks/results/2026-12-07-h200-bf/run23_dglu_batched.py --rounds 4 > $OUT/run23/ab.txt 2>&1
echo "exit $? at ${SECONDS}s" >> $OUT/run23/ab.txt
grep -v "^ *$" $OUT/run23/ab.txt | grep -v Warn | cut -c1-170
python3 -m pip install --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  > $OUT/run23/pip.txt 2>&1
PYTHONPATH=/tmp/site:$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d) timeout $(( ${LIMIT:-585} - SECONDS )) python3 -m pytest -q \
  -p no:cacheprovider -n 4 -rfs tests/test_grouped_mlp_ws.py -k "dglu or compiles or bits" > $OUT/run23/tests.txt 2>&1
echo "exit $? at ${SECONDS}s" >> $OUT/run23/tests.txt
tail -n 4 $OUT/run23/tests.txt | cut -c1-300
