#!/bin/bash
# Run 5 (GPU only): the GPU tests run 4's cap cut: the tuned compose route with rows tiles and the
# GLU epilogue (bitwise the plain route, torch.compile, CUDA graphs), ws_rows' layout contract,
# the check's grouped roles.
#   OUT=... bash benchmarks/results/2026-12-03-h200-ab/run5.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-ab5
mkdir -p $OUT/run5
timeout 170 python3 -m pytest -q -p no:cacheprovider tests/test_grouped_ws_wgrad.py tests/test_grouped_ws_rows.py \
  tests/test_check.py -k "compose or applies or declines or graph or (grouped and not bitwise)" > $OUT/run5/pytest.txt 2>&1
echo "exit $?" >> $OUT/run5/pytest.txt; tail -4 $OUT/run5/pytest.txt
