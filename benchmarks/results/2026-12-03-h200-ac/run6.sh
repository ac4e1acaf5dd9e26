#!/bin/bash
# Run 6 (GPU only): call plans (ops/grouped_glu_mlp/plan.py: the compose route's checks, route
# and forward launches decided once per argument metadata; ws_rows.Prepared): their GPU tests
# (the planned call bitwise the unplanned one, the Gluon launches through plans, the tuned
# route), then the host time per call against the compositions (run5_host.py).
#   OUT=... bash benchmarks/results/2026-12-03-h200-ac/run6.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-ac
R=benchmarks/results/2026-12-03-h200-ac
mkdir -p $OUT/run6
timeout 85 python3 -m pytest -q -p no:cacheprovider tests/test_grouped_plan.py \
  "tests/test_grouped_ws_rows.py::test_later_launches_skip_the_jit_and_give_its_bits" \
  tests/test_grouped_ws_wgrad.py tests/test_grouped_compose.py -k "plan or later_launches or compose_config or without_grad or ends" \
  > $OUT/run6/pytest.txt 2>&1
echo "exit $?" >> $OUT/run6/pytest.txt; grep -E "passed|failed|FAILED|Error" $OUT/run6/pytest.txt | head -12
timeout 75 python3 $R/run5_host.py > $OUT/run6/host.txt 2>&1
echo "exit $?" >> $OUT/run6/host.txt; grep -v Warn $OUT/run6/host.txt | tail -11
