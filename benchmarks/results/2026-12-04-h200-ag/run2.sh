#!/bin/bash
# Run 2 (GPU): the backward's weight gradients on a second stream in the product (compose.py):
# the plan / compose GPU tests (the new one: the side stream's bits against one stream's, eager
# and graph-replayed), then the op as called beside one stream and the compiled composition.
#   OUT=... bash benchmarks/results/2026-12-04-h200-ag/run2.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d)
mkdir -p $OUT/run2
timeout 240 python3 -m pytest -q -x -p no:cacheprovider tests/test_grouped_plan.py tests/test_grouped_compose.py \
  > $OUT/run2/pytest.txt 2>&1
echo "exit $?" >> $OUT/run2/pytest.txt
tail -4 $OUT/run2/pytest.txt
timeout 330 python3 benchmarks/results/2026-12-04-h200-ag/as_called.py --providers "compiled composition,tilefuse" \
  --shapes 1,2,3 --interleaves 32,none --rounds 7 --profile none > $OUT/run2/as_called.txt 2>&1
echo "exit $?" >> $OUT/run2/as_called.txt
grep -v "^  PASS" $OUT/run2/as_called.txt | cut -c1-160
