#!/bin/bash
# Run 1 (GPU, either card; carry .whl). On an H200 (the issues' targets are the H200's): the
# issues' tables on this tree (-az run 1's commands: so2_mixing_stack against DeePMD-kit 3.2.0
# fp32 and fp16x3 on its H20 tiles and torch.compile at issue 15's three shapes, 5 interleaved
# rounds; issue 16's step table). On an H100 (-ay runs 1-2 measured the tables there): the
# isolated sweep's test files on the GPU (2585d59 moved its timer and device checks into
# runner.sweep_isolated), 6 xdist workers.
#   OUT=... bash benchmarks/results/2026-12-06-h200-be/run1.sh
set -u
cd "$(dirname "$0")/../../.."
mkdir -p $OUT/run1
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader > $OUT/run1/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run1/gpu.txt
cat $OUT/run1/gpu.txt
python3 -m pip install --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  > $OUT/run1/pip.txt 2>&1
echo "pip exit $?" >> $OUT/run1/pip.txt
export PYTHONUNBUFFERED=1
if grep -q H200 $OUT/run1/gpu.txt; then
  export PYTHONPATH=/tmp/site:$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d)
  timeout 300 python3 benchmarks/so2_peers.py --rounds 5 --deepmd-tiles h20 \
    --peers tilefuse,tilefuse-l3,compile,deepmd,deepmd-fp16x3 --json $OUT/run1/interleaved.json 2>&1 \
    | grep -v Warn > $OUT/run1/interleaved.txt
  echo "exit ${PIPESTATUS[0]} at ${SECONDS}s" >> $OUT/run1/interleaved.txt
  grep -E "^\| |exit" $OUT/run1/interleaved.txt | tail -18
  export PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d)
  timeout $((585 - SECONDS)) python3 benchmarks/grouped_compose_gpu_check.py --shapes 1,2,3 --interleaves 32,none \
    --rounds 5 --providers "compose,compiled composition,tilefuse,fp8_block" --profile none > $OUT/run1/steps.txt 2>&1
  echo "exit $? at ${SECONDS}s" >> $OUT/run1/steps.txt
  grep -vE "^\s*$" $OUT/run1/steps.txt | tail -24 | cut -c1-200
else
  export PYTHONPATH=/tmp/site:$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d)
  timeout 200 python3 -m pytest -q -p no:cacheprovider -n 6 -rfs tests/test_tuning_isolate.py \
    tests/test_check_isolate.py > $OUT/run1/tests.txt 2>&1
  echo "exit $? at ${SECONDS}s" >> $OUT/run1/tests.txt
  tail -8 $OUT/run1/tests.txt
fi
