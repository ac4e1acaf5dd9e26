#!/bin/bash
# Run 8 (prepared, not run this session: no device time left): the fp8_block GEMM roles and
# weight gradients with the float8 data through TMA (GemmConfig.tma, 93cd2ad) beside the pointer
# tilings, at the spec's three shapes, then the fp8_block sweep of the three keys with its TMA
# candidate. About 4.5 + 4 minutes: split over two calls if needed (the two commands below).
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache
timeout 290 python3 benchmarks/grouped_profile.py --recipes fp8_block --shapes 1,2,3 --rounds 5 > $OUT/fp8_profile.txt 2>&1
echo "profile exit $?" >> $OUT/fp8_profile.txt
grep -v "^  rows\|^  cols\|^  W" $OUT/fp8_profile.txt | tail -80
timeout 290 python3 -m tilefuse.cli tune --op grouped_glu_mlp --dtype fp8_block --shape 8x16384x4096x3584 \
  --shape 64x32768x2048x1408 --shape 128x65536x2048x768 --force --rounds 6 --no-progress > $OUT/tune-fp8.txt 2>&1
echo "tune exit $?" >> $OUT/tune-fp8.txt
python3 -m tilefuse.cli tune --export-builtin $OUT >> $OUT/tune-fp8.txt 2>&1
tail -8 $OUT/tune-fp8.txt
