#!/bin/bash
# Run 6 (GPU): the final tree's ws_rows halves-layout GLU epilogue (the producer's paired loads
# under the consumers' condition, dac637e): its bitwise tests against torch._grouped_mm and the
# GLU kernel, and the halves compose-config tests.
#   OUT=... bash benchmarks/results/2026-12-04-h200-ae/run6.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d)
mkdir -p $OUT/run6
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/test_grouped_ws_rows.py tests/test_grouped_ws_wgrad.py \
  -k "(glu_epilogue and None) or (compose_config_runs and None)" > $OUT/run6/pytest.txt 2>&1
echo "exit $?" >> $OUT/run6/pytest.txt; grep -E "passed|failed|FAILED|Error|exit" $OUT/run6/pytest.txt | head -12
# Second step (it ran as a separate device call right after, writing run6b/pytest.txt, kept here
# as run6/pytest-plan.txt): the plans with the halves layout.
timeout 75 python3 -m pytest -q -p no:cacheprovider tests/test_grouped_plan.py -k "None" > $OUT/run6/pytest-plan.txt 2>&1
echo "exit $?" >> $OUT/run6/pytest-plan.txt; tail -3 $OUT/run6/pytest-plan.txt
