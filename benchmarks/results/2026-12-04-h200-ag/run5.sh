#!/bin/bash
# Run 5 (GPU): the product's streams (tree named in the README): the op as called, bf16 and
# fp8_block, against one stream and the compiled composition at the spec's three shapes; then
# the grouped tests (ws_rows' file, the other grouped files and test_check.py), two processes.
#   OUT=... bash benchmarks/results/2026-12-04-h200-ag/run5.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
mkdir -p $OUT/run5
TILEFUSE_CACHE_DIR=$(mktemp -d) timeout 200 python3 benchmarks/results/2026-12-04-h200-ag/as_called_product.py \
  --providers "compiled composition,tilefuse,fp8_block" --shapes 1,2,3 --interleaves 32 --rounds 7 --profile none \
  > $OUT/run5/as_called.txt 2>&1
echo "exit $?" >> $OUT/run5/as_called.txt
grep -v "^  PASS" $OUT/run5/as_called.txt | grep -v "TFLOP" | cut -c1-260
PYTEST='import signal, sys, pytest; signal.signal(signal.SIGINT, signal.default_int_handler); sys.exit(pytest.main(sys.argv[1:]))'
grouped=$(ls tests/test_grouped_*.py | grep -v /test_grouped_ws_rows.py)
TILEFUSE_CACHE_DIR=$PWD/.tfcache-a timeout -s INT -k 20 330 python3 -c "$PYTEST" -q -p no:cacheprovider -rfs --tb=short \
  tests/test_grouped_ws_rows.py > $OUT/run5/pytest-ws-rows.txt 2>&1 &
TILEFUSE_CACHE_DIR=$PWD/.tfcache-b timeout -s INT -k 20 330 python3 -c "$PYTEST" -q -p no:cacheprovider -rfs --tb=short \
  $grouped tests/test_check.py > $OUT/run5/pytest-grouped.txt 2>&1 &
wait
for f in $OUT/run5/pytest-*.txt; do echo "== $f"; grep -E "^(FAILED|ERROR)" $f | head; tail -1 $f; done
