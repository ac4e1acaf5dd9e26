#!/bin/bash
# Run 2 (GPU only): after run 1, the Descriptor launches keyed by an interned specialization
# and launched through SpecializingLauncher.launch_held (one lookup a launch), and the backward
# plan test's launch counts compared with the unplanned backward's: the GPU tests run 1's -x
# cut short (the plans, ws_rows, ws_wgrad, the launcher), the compose route's plan / graph /
# compile tests; the host time per call again (run1_host.py).
#   OUT=... bash benchmarks/results/2026-12-04-h200-ad/run2.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-ad
R=benchmarks/results/2026-12-04-h200-ad
mkdir -p $OUT/run2
timeout 230 python3 -m pytest -q -p no:cacheprovider tests/test_grouped_plan.py tests/test_grouped_ws_rows.py \
  tests/test_grouped_ws_wgrad.py tests/test_specializing_launcher.py > $OUT/run2/pytest.txt 2>&1
echo "exit $?" >> $OUT/run2/pytest.txt; grep -E "passed|failed|FAILED|Error" $OUT/run2/pytest.txt | head -12
timeout 70 python3 -m pytest -q -p no:cacheprovider tests/test_grouped_compose.py tests/test_dyt_lean.py \
  -k "plan or compose_config or without_grad or ends or graph or compile or lean or direct" > $OUT/run2/pytest2.txt 2>&1
echo "exit $?" >> $OUT/run2/pytest2.txt; grep -E "passed|failed|FAILED|Error" $OUT/run2/pytest2.txt | head -8
timeout 130 python3 $R/run1_host.py > $OUT/run2/host.txt 2>&1
echo "exit $?" >> $OUT/run2/host.txt; grep -v Warn $OUT/run2/host.txt | tail -16
