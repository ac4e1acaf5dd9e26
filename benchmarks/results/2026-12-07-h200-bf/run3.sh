#!/bin/bash
# Run 3 (GPU, either card; carry .whl): the issues' tables on this tree (their targets are the
# H200's; the card is recorded): so2_mixing_stack against DeePMD-kit 3.2.0 (fp32 and fp16x3,
# its H20 tiles) and torch.compile at issue 15's three shapes, 5 interleaved rounds (-ay run 1's
# command), then issue 16's step table (-ay run 2's command); first the 3xTF32 rejection test on
# the GPU.
#   OUT=... bash benchmarks/results/2026-12-07-h200-bf/run3.sh
set -u
cd "$(dirname "$0")/../../.."
mkdir -p $OUT/run3
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader > $OUT/run3/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run3/gpu.txt
cat $OUT/run3/gpu.txt
python3 -m pip install --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  > $OUT/run3/pip.txt 2>&1
echo "pip exit $?" >> $OUT/run3/pip.txt
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d)
# the 3xTF32 rejection test in its GPU form (run 2 made its inputs on the CPU; fixed in acf18c4)
timeout 60 python3 -m pytest -q -p no:cacheprovider -rfs tests/test_so2_level3.py -k tf32_split_loses \
  > $OUT/run3/tf32_test.txt 2>&1
echo "exit $? at ${SECONDS}s" >> $OUT/run3/tf32_test.txt
tail -2 $OUT/run3/tf32_test.txt
timeout $((360 - SECONDS)) python3 benchmarks/so2_peers.py --rounds 5 --deepmd-tiles h20 \
  --peers tilefuse,tilefuse-l3,compile,deepmd,deepmd-fp16x3 --json $OUT/run3/interleaved.json 2>&1 \
  | grep -v Warn > $OUT/run3/interleaved.txt
echo "exit ${PIPESTATUS[0]} at ${SECONDS}s" >> $OUT/run3/interleaved.txt
grep -E "^\| |exit" $OUT/run3/interleaved.txt | tail -18
export PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d)
timeout $((585 - SECONDS)) python3 benchmarks/grouped_compose_gpu_check.py --shapes 1,2,3 --interleaves 32,none --rounds 5 \
  --providers "compose,compiled composition,tilefuse,fp8_block" --profile none > $OUT/run3/steps.txt 2>&1
echo "exit $? at ${SECONDS}s" >> $OUT/run3/steps.txt
grep -vE "^\s*$" $OUT/run3/steps.txt | tail -24 | cut -c1-200
