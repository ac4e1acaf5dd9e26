#!/bin/bash
# Run 1 (GPU, either card; carry .whl): on an H200, the issues' tables (-az run 1's script,
# which stops at once on another card); on any other card, `tilefuse check`'s child processes
# on a GPU: the check's test files (an illegal memory access in one part and a fresh process
# for the next included), then `tilefuse check --quick` as users run it (isolated parts).
#   OUT=... bash benchmarks/results/2026-12-06-h200-bc/run1.sh
set -u
cd "$(dirname "$0")/../../.."
OUT=$OUT bash benchmarks/results/2026-12-06-h200-az/run1.sh
if grep -q H200 $OUT/run1/gpu.txt; then exit 0; fi
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  > /dev/null 2>&1 || echo "pip failed"
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d)
timeout 240 python3 -m pytest -q -p no:cacheprovider -n 6 -rf tests/test_check_isolate.py tests/test_check.py \
  tests/test_cli_packaging.py > $OUT/run1/tests.txt 2>&1
echo "exit $? at ${SECONDS}s" >> $OUT/run1/tests.txt
tail -4 $OUT/run1/tests.txt
timeout $((570 - SECONDS)) python3 -m tilefuse.cli check --quick --no-progress --out $OUT/run1/check \
  > $OUT/run1/check.txt 2>&1
echo "exit $? at ${SECONDS}s" >> $OUT/run1/check.txt
grep -vE "^\s*$" $OUT/run1/check.txt | grep -v Warn | tail -14 | cut -c1-220
