#!/bin/bash
# Run 2 (GPU): the ws kernel as it now ships (chunk pairs, a MAX_STAGES ring) and fc1 + GLU
# through it: the GPU tests of tests/test_grouped_mlp_ws.py; per
# role bits and time against the Triton launches (ws_glu_roles.py); fp8_block as called with
# the GLU through the ws kernel and through the Triton launch, bf16 tilefuse and the compiled
# composition beside it; the fp8_block sweep of the spec's three keys, exported.
#   OUT=... bash benchmarks/results/2026-12-04-h200-ai/run2.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-ai2
D=benchmarks/results/2026-12-04-h200-ai
mkdir -p $OUT/run2
timeout 150 python3 -m pytest -q -p no:cacheprovider -rfs --tb=short tests/test_grouped_mlp_ws.py \
  -k "not compiles" > $OUT/run2/pytest.txt 2>&1; echo "exit $?" >> $OUT/run2/pytest.txt
grep -E "^(FAILED|ERROR)" $OUT/run2/pytest.txt | head -20; tail -2 $OUT/run2/pytest.txt
timeout 120 python3 $D/ws_glu_roles.py --rounds 7 > $OUT/run2/roles.txt 2>&1; echo "exit $?" >> $OUT/run2/roles.txt
cat $OUT/run2/roles.txt
timeout 200 python3 $D/as_called_glu.py --providers "compiled composition,tilefuse,fp8_block" --shapes 1,2,3 \
  --interleaves 32 --rounds 5 --profile none > $OUT/run2/as_called.txt 2>&1; echo "exit $?" >> $OUT/run2/as_called.txt
grep -v "^  *$" $OUT/run2/as_called.txt | tail -30
timeout 150 python3 -m tilefuse.cli tune --op grouped_glu_mlp --dtype fp8_block --shape 64x32768x2048x1408 \
  --shape 128x65536x2048x768 --shape 8x16384x4096x3584 --force --rounds 6 --no-progress > $OUT/run2/tune-fp8.txt 2>&1
echo "tune exit $?" >> $OUT/run2/tune-fp8.txt
python3 -m tilefuse.cli tune --export-builtin $OUT/run2 >> $OUT/run2/tune-fp8.txt 2>&1
grep -v Warn $OUT/run2/tune-fp8.txt | grep -v "^timed" | tail -12
