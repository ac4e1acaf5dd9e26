#!/bin/bash
# Run 6 (GPU): the float16 ws tests added after run 5; then run 3 again at shapes 2-3 with 11
# rounds (the stream-use question its README leaves open).
#   OUT=... bash benchmarks/results/2026-12-04-h200-ai/run6.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-ai6
mkdir -p $OUT/run6
timeout 90 python3 -m pytest -q -p no:cacheprovider -rfs --tb=short tests/test_grouped_mlp_ws.py -k float16 \
  > $OUT/run6/pytest.txt 2>&1; echo "exit $?" >> $OUT/run6/pytest.txt
tail -3 $OUT/run6/pytest.txt
timeout 170 python3 benchmarks/results/2026-12-04-h200-ai/as_called_glu.py --providers "tilefuse,fp8_block" \
  --one-stream --shapes 2,3 --interleaves 32 --rounds 11 --profile none > $OUT/run6/as_called.txt 2>&1
echo "exit $?" >> $OUT/run6/as_called.txt
grep -E "ratios|^  (tilefuse|fp8)|exit" $OUT/run6/as_called.txt
