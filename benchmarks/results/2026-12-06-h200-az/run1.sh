#!/bin/bash
# Run 1 (GPU, either card; carry .whl): on an H200 only (the issues' targets are the H200's),
# the issues' tables on this tree: so2_mixing_stack against DeePMD-kit 3.2.0 (fp32 and fp16x3,
# its H20 tiles) and torch.compile at issue 15's three shapes, 5 interleaved rounds (-ay run 1's
# command), then issue 16's step table (-ay run 2's command). On an H100 it records the card and
# stops: -ay runs 1-2 measured this tree's tables there.
#   OUT=... bash benchmarks/results/2026-12-06-h200-az/run1.sh
set -u
cd "$(dirname "$0")/../../.."
mkdir -p $OUT/run1
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader > $OUT/run1/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run1/gpu.txt
cat $OUT/run1/gpu.txt
if ! grep -q H200 $OUT/run1/gpu.txt; then echo "not an H200: stopped"; exit 0; fi
python3 -m pip install --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  > $OUT/run1/pip.txt 2>&1
echo "pip exit $?" >> $OUT/run1/pip.txt
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d)
timeout 300 python3 benchmarks/so2_peers.py --rounds 5 --deepmd-tiles h20 \
  --peers tilefuse,tilefuse-l3,compile,deepmd,deepmd-fp16x3 --json $OUT/run1/interleaved.json 2>&1 \
  | grep -v Warn > $OUT/run1/interleaved.txt
echo "exit ${PIPESTATUS[0]} at ${SECONDS}s" >> $OUT/run1/interleaved.txt
grep -E "^\| |exit" $OUT/run1/interleaved.txt | tail -18
export PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d)
timeout $((585 - SECONDS)) python3 benchmarks/grouped_compose_gpu_check.py --shapes 1,2,3 --interleaves 32,none --rounds 5 \
  --providers "compose,compiled composition,tilefuse,fp8_block" --profile none > $OUT/run1/steps.txt 2>&1
echo "exit $? at ${SECONDS}s" >> $OUT/run1/steps.txt
grep -vE "^\s*$" $OUT/run1/steps.txt | tail -24 | cut -c1-200
