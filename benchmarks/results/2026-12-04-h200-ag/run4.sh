#!/bin/bash
# Run 4 (GPU): streams.py in both routes: the grouped plan / compose / recipes / kernels tests
# (the new ones: the side stream's bits against one stream's), then the op as called, bf16 and
# fp8_block, each with the second stream on (default and high priority) and off.
#   OUT=... bash benchmarks/results/2026-12-04-h200-ag/run4.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d)
mkdir -p $OUT/run4
timeout 300 python3 -m pytest -q -p no:cacheprovider tests/test_grouped_plan.py tests/test_grouped_compose.py \
  tests/test_grouped_mlp_recipes.py tests/test_grouped_mlp_kernels.py > $OUT/run4/pytest.txt 2>&1
echo "exit $?" >> $OUT/run4/pytest.txt
grep -E "^(FAILED|ERROR)" $OUT/run4/pytest.txt | head; tail -2 $OUT/run4/pytest.txt
timeout 280 python3 benchmarks/results/2026-12-04-h200-ag/as_called_streams.py --providers "tilefuse,fp8_block" \
  --shapes 1,2,3 --interleaves 32 --rounds 7 --profile none > $OUT/run4/as_called.txt 2>&1
echo "exit $?" >> $OUT/run4/as_called.txt
grep -v "^  PASS" $OUT/run4/as_called.txt | cut -c1-220
