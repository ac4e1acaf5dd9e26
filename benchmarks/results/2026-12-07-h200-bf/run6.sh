#!/bin/bash
# Run 6 (GPU; prepared, not yet run: move it to the folder of the day it runs): 
#   1. tests/test_grouped_mlp_ws.py whole (4 xdist workers): the ws dGLU's bitwise tests at
#      every interleave with c050cfc's epilogue layout (run 5 ran only the three tests run 4
#      failed; the interleave-8 cases last ran on the layout before it);
#   2. so2_mixing_stack's 2x64 level-3 key re-swept with the validation that covers the training
#      backward's weight gradients (it ran past its 100 s in -aj run 10, so a training backward
#      there runs the exact path), up to 330 s, its table exported after it (on the card it
#      runs on: an H200's entry merges into the H200 table, an H100's into the H100 table, by
#      hand, keeping the other families' entries).
#   OUT=... [PART=tests or PART=sweep: that part alone] bash benchmarks/results/2026-12-07-h200-bf/run6.sh
set -u
cd "$(dirname "$0")/../../.."
mkdir -p $OUT/run6
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader > $OUT/run6/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run6/gpu.txt
cat $OUT/run6/gpu.txt
python3 -m pip install --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  > $OUT/run6/pip.txt 2>&1
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d)
if [ "${PART:-tests}" = tests ]; then
timeout 200 python3 -m pytest -q -p no:cacheprovider -n 4 -rfs tests/test_grouped_mlp_ws.py > $OUT/run6/tests.txt 2>&1
echo "exit $? at ${SECONDS}s" >> $OUT/run6/tests.txt
tail -4 $OUT/run6/tests.txt | cut -c1-300
fi
[ "${PART:-}" = tests ] && exit 0
export PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-bf6
timeout $((575 - SECONDS)) python3 -m tilefuse.cli tune --op so2_mixing_stack --shape 2x64 --pass level3 --force \
  --no-progress > $OUT/run6/tune-so2.txt 2>&1
echo "tune 2x64 level3 exit $? at ${SECONDS}s" >> $OUT/run6/tune-so2.txt
python3 -m tilefuse.cli tune --export-builtin $OUT/run6 > /dev/null 2>&1
grep -E "^so2_mixing_stack  |exit|weight" $OUT/run6/tune-so2.txt | tail -6 | cut -c1-250
