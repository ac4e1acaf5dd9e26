#!/bin/bash
# Run 3 (GPU only): run 2's tests found ws_rows' GLU-epilogue test failing with float32 probs:
# DescriptorLaunch keyed a tensor argument by its alignment only, so a kernel compiled for
# bf16 probs ran float32 ones. Fixed (the tensors' dtypes are in the key); the plan, ws_rows
# and ws_wgrad GPU tests in full.
#   OUT=... bash benchmarks/results/2026-12-04-h200-ad/run3.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-ad
mkdir -p $OUT/run3
timeout 400 python3 -m pytest -q -p no:cacheprovider tests/test_grouped_ws_rows.py tests/test_grouped_plan.py \
  tests/test_grouped_ws_wgrad.py > $OUT/run3/pytest.txt 2>&1
echo "exit $?" >> $OUT/run3/pytest.txt; grep -E "passed|failed|FAILED|Error|exit" $OUT/run3/pytest.txt | head -20
