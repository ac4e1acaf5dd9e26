#!/bin/bash
# Run 4 (GPU only): the compose route's launches through triton_common.SpecializingLauncher
# (the JIT once per specialization), its offsets and count check in one launch, the forward
# without grad outside the autograd.Function: the GPU tests of what changed, then the host
# time per call layer by layer (run3_hostprof.py) and against the plain composition
# (run2_host.py).
#   OUT=... bash benchmarks/results/2026-12-03-h200-ac/run4.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-ac
R=benchmarks/results/2026-12-03-h200-ac
mkdir -p $OUT/run4
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/test_specializing_launcher.py tests/test_grouped_compose.py \
  "tests/test_grouped_ws_rows.py::test_later_launches_skip_the_jit_and_give_its_bits" \
  tests/test_grouped_ws_wgrad.py tests/test_grouped_ws_rows.py -k "not compiles" > $OUT/run4/pytest.txt 2>&1
echo "exit $?" >> $OUT/run4/pytest.txt; grep -E "passed|failed|FAILED|Error" $OUT/run4/pytest.txt | head -20
timeout 100 python3 $R/run3_hostprof.py > $OUT/run4/hostprof.txt 2>&1
echo "exit $?" >> $OUT/run4/hostprof.txt; grep -A16 "^| layer" $OUT/run4/hostprof.txt; tail -1 $OUT/run4/hostprof.txt
timeout 120 python3 $R/run2_host.py > $OUT/run4/host.txt 2>&1
echo "exit $?" >> $OUT/run4/host.txt; grep -v Warn $OUT/run4/host.txt | tail -10
