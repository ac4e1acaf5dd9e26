#!/bin/bash
# Run 20 (GPU; what it runs depends on the card that comes):
#   an H200: run 19's H200 part (the H200 table's fp8 halves sweeps and so2's 2x64 level-3 key);
#   another card (an H100): the check's new fp8 halves row and the ws tests on this tree:
#     `tilefuse check --quick --no-bench --ops grouped_glu_mlp`, test_check.py's Gluon rows test
#     on Hopper, and tests/test_grouped_mlp_ws.py whole.
#   OUT=... bash benchmarks/results/2026-12-07-h200-bf/run20.sh
set -u
cd "$(dirname "$0")/../../.."
mkdir -p $OUT/run20
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader > $OUT/run20/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run20/gpu.txt
cat $OUT/run20/gpu.txt
if grep -q H200 $OUT/run20/gpu.txt; then
  OUT=$OUT bash benchmarks/results/2026-12-07-h200-bf/run19.sh
  exit
fi
python3 -m pip install --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  > $OUT/run20/pip.txt 2>&1
PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d) timeout 200 python3 -m tilefuse.cli check --quick \
  --out $OUT/run20/check-report --no-bench --ops grouped_glu_mlp --no-progress > $OUT/run20/check.txt 2>&1
echo "exit $? at ${SECONDS}s" >> $OUT/run20/check.txt
tail -5 $OUT/run20/check.txt | cut -c1-200
grep -i "warp-specialised" $OUT/run20/check-report/report.md | cut -c1-200
PYTHONPATH=/tmp/site:$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d) timeout $((580 - SECONDS)) python3 -m pytest -q \
  -p no:cacheprovider -n 4 -rfs tests/test_grouped_mlp_ws.py "tests/test_check.py::test_grouped_check_gluon_rows_pass_on_hopper" \
  > $OUT/run20/tests.txt 2>&1
echo "exit $? at ${SECONDS}s" >> $OUT/run20/tests.txt
tail -4 $OUT/run20/tests.txt | cut -c1-300
