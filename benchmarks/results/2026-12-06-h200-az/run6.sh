#!/bin/bash
# Run 6 (GPU, either card; carry .whl): run 5's test files (the last fixes), cut at 150 s, then on
# an H200 only run 1's tables (issue 15's so2 table against DeePMD-kit 3.2.0 and torch.compile,
# issue 16's step table), each cut shorter to fit what was left of this session's device time.
#   OUT=... bash benchmarks/results/2026-12-06-h200-az/run6.sh
set -u
cd "$(dirname "$0")/../../.."
mkdir -p $OUT/run6
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader | tee $OUT/run6/gpu.txt
python3 -m pip install --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  > $OUT/run6/pip.txt 2>&1
echo "pip exit $?" >> $OUT/run6/pip.txt
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src
TILEFUSE_CACHE_DIR=$(mktemp -d) timeout 150 python3 -m pytest -q -p no:cacheprovider -n 10 -rf tests/test_grouped_plan.py \
  tests/test_grouped_compose.py tests/test_policy.py tests/test_tuning_robustness.py tests/test_nn_dyt_fixes.py \
  tests/test_grouped_mlp_api.py > $OUT/run6/pytest.txt 2>&1
echo "pytest exit $? at ${SECONDS}s" >> $OUT/run6/pytest.txt
tail -2 $OUT/run6/pytest.txt; grep -E "^FAILED|^ERROR" $OUT/run6/pytest.txt | head -10
if ! grep -q H200 $OUT/run6/gpu.txt; then echo "not an H200: tables skipped"; exit 0; fi
TILEFUSE_CACHE_DIR=$(mktemp -d) timeout 200 python3 benchmarks/so2_peers.py --rounds 5 --deepmd-tiles h20 \
  --peers tilefuse,tilefuse-l3,compile,deepmd,deepmd-fp16x3 --json $OUT/run6/interleaved.json 2>&1 \
  | grep -v Warn > $OUT/run6/interleaved.txt
echo "exit ${PIPESTATUS[0]} at ${SECONDS}s" >> $OUT/run6/interleaved.txt
grep -E "^\| |exit" $OUT/run6/interleaved.txt | tail -18
PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d) timeout $((560 - SECONDS)) python3 benchmarks/grouped_compose_gpu_check.py \
  --shapes 1,2,3 --interleaves 32,none --rounds 5 --providers "compose,compiled composition,tilefuse,fp8_block" \
  --profile none > $OUT/run6/steps.txt 2>&1
echo "exit $? at ${SECONDS}s" >> $OUT/run6/steps.txt
grep -vE "^\s*$" $OUT/run6/steps.txt | tail -24 | cut -c1-200
