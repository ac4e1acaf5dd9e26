#!/bin/bash
# Run 5 (GPU only): the host time per call against the compositions, interleaved
# (run5_host.py); the op as users call it against torch._grouped_mm + torch.compile
# (benchmarks/grouped_compose_gpu_check.py, interleave 32 and None) on the -ac table and launch
# route; the GPU tests of the tuned route (rows tiles, the GLU epilogue through compose._fc1_glu)
# and of the direct launches, after the last host-side changes.
#   OUT=... bash benchmarks/results/2026-12-03-h200-ac/run5.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-ac
R=benchmarks/results/2026-12-03-h200-ac
mkdir -p $OUT/run5
timeout 100 python3 $R/run5_host.py > $OUT/run5/host.txt 2>&1
echo "exit $?" >> $OUT/run5/host.txt; grep -v Warn $OUT/run5/host.txt | tail -12
timeout 330 python3 benchmarks/grouped_compose_gpu_check.py --interleaves 32,none --rounds 5 > $OUT/run5/check.txt 2>&1
echo "exit $?" >> $OUT/run5/check.txt
grep "^shape\|compiled\|tilefuse  \|compose  \|fp8\|FAIL\|exit" $OUT/run5/check.txt | grep -v "^ *[0-9.]* ms  *[0-9.]*x"
timeout 90 python3 -m pytest -q -p no:cacheprovider tests/test_grouped_ws_rows.py tests/test_grouped_ws_wgrad.py \
  -k "compose_config or rows_tile or later_launches" > $OUT/run5/pytest.txt 2>&1
echo "exit $?" >> $OUT/run5/pytest.txt; tail -2 $OUT/run5/pytest.txt
