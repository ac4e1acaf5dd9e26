#!/bin/bash
# Run 5 (GPU only): fc1's GLU epilogue in the halves layout (ws_rows._glu_halves_epilogue): the
# GPU tests (bitwise the GLU kernel and torch._grouped_mm, plans, the compose config's bits
# and its compile with interleave None), then run5_halves.py (the op as called, on against off).
#   OUT=... bash benchmarks/results/2026-12-04-h200-ad/run5.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-ad
R=benchmarks/results/2026-12-04-h200-ad
mkdir -p $OUT/run5
timeout 150 python3 -m pytest -q -p no:cacheprovider "tests/test_grouped_ws_rows.py::test_the_glu_epilogue_is_bitwise_the_glu_kernel" \
  tests/test_grouped_plan.py tests/test_grouped_ws_wgrad.py -k "glu_epilogue or plan or compose_config" \
  > $OUT/run5/pytest.txt 2>&1
echo "exit $?" >> $OUT/run5/pytest.txt; grep -E "passed|failed|FAILED|Error|exit" $OUT/run5/pytest.txt | head -20
timeout 200 python3 $R/run5_halves.py > $OUT/run5/halves.txt 2>&1
echo "exit $?" >> $OUT/run5/halves.txt; grep -v Warn $OUT/run5/halves.txt | tail -8
