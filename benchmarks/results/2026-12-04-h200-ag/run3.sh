#!/bin/bash
# Run 3 (GPU): run 2's tests again with the new test's count fixed (the plan passes its dgrads
# through _on_side with no stream), then shape 1 as called with more rounds, ratios to 3 decimals.
#   OUT=... bash benchmarks/results/2026-12-04-h200-ag/run3.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d)
mkdir -p $OUT/run3
timeout 240 python3 -m pytest -q -p no:cacheprovider tests/test_grouped_plan.py tests/test_grouped_compose.py \
  > $OUT/run3/pytest.txt 2>&1
echo "exit $?" >> $OUT/run3/pytest.txt
tail -4 $OUT/run3/pytest.txt
timeout 300 python3 benchmarks/results/2026-12-04-h200-ag/as_called.py --providers "compiled composition,tilefuse" \
  --shapes 1 --interleaves 32,none --rounds 11 --profile none > $OUT/run3/as_called.txt 2>&1
echo "exit $?" >> $OUT/run3/as_called.txt
grep -v "^  PASS" $OUT/run3/as_called.txt | cut -c1-200
