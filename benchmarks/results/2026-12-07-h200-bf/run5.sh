#!/bin/bash
# Run 5 (GPU, any Hopper card): run 4's two failures mended (the NaN test's partials compared
# NaN for NaN; the dGLU epilogue's interleave-8 layout without repeated rows) and
# tests/test_grouped_mlp_ws.py again (4 xdist workers, this image's ptxas for the compile test);
# then run5_step_ab.py: fp8_block's step as called with the ws dGLU and with the Triton dGLU,
# 15 interleaved rounds of graph replays and of eager calls, and each one's kernel times.
#   OUT=... [LIMIT=seconds, default 420] [QUICK=1: run 4's two failing tests alone, then the A/B
#   in 7 rounds at shapes 2-3] bash benchmarks/results/2026-12-07-h200-bf/run5.sh
set -u
cd "$(dirname "$0")/../../.."
D=benchmarks/results/2026-12-07-h200-bf
mkdir -p $OUT/run5
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader > $OUT/run5/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run5/gpu.txt
cat $OUT/run5/gpu.txt
python3 -m pip install --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  > $OUT/run5/pip.txt 2>&1
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d)
if [ -n "${QUICK:-}" ]; then
  timeout 150 python3 -m pytest -q -p no:cacheprovider -n 3 -rfs tests/test_grouped_mlp_ws.py \
    -k "compiles_for_sm90 or nan_and_inf" > $OUT/run5/tests.txt 2>&1
else
  timeout 200 python3 -m pytest -q -p no:cacheprovider -n 4 -rfs tests/test_grouped_mlp_ws.py > $OUT/run5/tests.txt 2>&1
fi
echo "exit $? at ${SECONDS}s" >> $OUT/run5/tests.txt
tail -4 $OUT/run5/tests.txt | cut -c1-300
export PYTHONPATH=$PWD/src
AB="--rounds 15"
[ -n "${QUICK:-}" ] && AB="--rounds 7 --shapes 2,3"
timeout $((${LIMIT:-420} - SECONDS)) python3 $D/run5_step_ab.py $AB > $OUT/run5/step_ab.txt 2>&1
echo "exit $? at ${SECONDS}s" >> $OUT/run5/step_ab.txt
grep -vE "^\s*$|Warn|warn" $OUT/run5/step_ab.txt | cut -c1-200 | tail -45
