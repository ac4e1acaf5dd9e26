#!/bin/bash
# Run 1 (GPU): fp8_block's fc1 + GLU kernel and the kernels route's second stream as per-key
# sweep choices (GemmConfig.rows_glu with ws, GemmConfig.side_stream): the GPU tests of
# tests/test_grouped_mlp_ws.py (the four ws forms bitwise the Triton kernels) and the side-stream
# bit test; the fp8_block sweep of the spec's three keys with the four ws forms, exported; then
# the op as called with that table (the cache dir holds it): fp8_block (the table's pick) and
# its forced forms (-ai's as_called_glu.py: the Triton GLU, one stream) beside bf16 tilefuse and
# the compiled composition, 7 rounds, graph replay.
#   OUT=... bash benchmarks/results/2026-12-04-h200-aj/run1.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-aj1
rm -rf $TILEFUSE_CACHE_DIR
mkdir -p $OUT/run1
timeout 200 python3 -m pytest -q -p no:cacheprovider -rfs --tb=short tests/test_grouped_mlp_ws.py \
  tests/test_grouped_mlp_recipes.py -k "(test_grouped_mlp_ws and not compiles) or side_stream_gives" \
  > $OUT/run1/pytest.txt 2>&1; echo "exit $?" >> $OUT/run1/pytest.txt
grep -E "^(FAILED|ERROR)" $OUT/run1/pytest.txt | head -20; tail -2 $OUT/run1/pytest.txt
timeout 150 python3 -m tilefuse.cli tune --op grouped_glu_mlp --dtype fp8_block --shape 64x32768x2048x1408 \
  --shape 128x65536x2048x768 --shape 8x16384x4096x3584 --force --rounds 6 --no-progress > $OUT/run1/tune-fp8.txt 2>&1
echo "tune exit $?" >> $OUT/run1/tune-fp8.txt
python3 -m tilefuse.cli tune --export-builtin $OUT/run1 >> $OUT/run1/tune-fp8.txt 2>&1
grep -v Warn $OUT/run1/tune-fp8.txt | tail -40
timeout 220 python3 benchmarks/results/2026-12-04-h200-ai/as_called_glu.py \
  --providers "compiled composition,tilefuse,fp8_block" --one-stream --shapes 1,2,3 --interleaves 32 --rounds 7 \
  --profile none > $OUT/run1/as_called.txt 2>&1; echo "exit $?" >> $OUT/run1/as_called.txt
grep -v "^  *$" $OUT/run1/as_called.txt | grep -v "PASS" | tail -40
