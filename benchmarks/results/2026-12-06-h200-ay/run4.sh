#!/bin/bash
# Run 4 (GPU, after run 3 on the same machine; carry .whl): the benchmark programs with their
# new checks at the spec's shapes: grouped_compose_gpu_check.py (every timed provider checked
# against float64 at the timed key under poisoned allocations before it is timed), interleave
# 32, shapes 1-3, 3 rounds; then so2_peers.py at Neo (tilefuse, torch.compile, DeePMD-kit fp32;
# checks poisoned; ratios per round), 5 rounds.
#   OUT=... bash benchmarks/results/2026-12-06-h200-ay/run4.sh
set -u
cd "$(dirname "$0")/../../.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  > /dev/null 2>&1 || echo "pip failed"
export PYTHONUNBUFFERED=1 TILEFUSE_CACHE_DIR=$(mktemp -d)
mkdir -p $OUT/run4
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/run4/gpu.txt
PYTHONPATH=$PWD/src timeout 330 python3 benchmarks/grouped_compose_gpu_check.py --shapes 1,2,3 --interleaves 32 --rounds 3 \
  --providers "compose,compiled composition,tilefuse,fp8_block" --profile none > $OUT/run4/steps.txt 2>&1
echo "exit $? at ${SECONDS}s" >> $OUT/run4/steps.txt
grep -vE "^\s*$" $OUT/run4/steps.txt | tail -40 | cut -c1-160
PYTHONPATH=/tmp/site:$PWD/src timeout $((580 - SECONDS)) python3 benchmarks/so2_peers.py --shapes neo --rounds 5 \
  --deepmd-tiles h20 --peers tilefuse,compile,deepmd --json $OUT/run4/neo.json 2>&1 | grep -v Warn > $OUT/run4/neo.txt
echo "exit ${PIPESTATUS[0]} at ${SECONDS}s" >> $OUT/run4/neo.txt
grep -E "^\| |exit|not equivalent|FAIL" $OUT/run4/neo.txt | tail -8
