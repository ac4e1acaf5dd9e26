#!/bin/bash
# Run 5 (prepared for the next device session, not run: this session's device time was spent).
# The fused route with the relay's sigma pass (e45c87d, d86f699), exact and in 3xfp16 at level 3: the GPU
# tests of its bitwise contracts, then L3-C32 and L6-C32 re-swept (the backward with the
# sigma-pass fused candidates, the level-3 key with the fused 3xfp16 ones), exported. Run 6
# sweeps L2-C64 and runs so2_peers.py on the swept table (the same TILEFUSE_CACHE_DIR).
#   OUT=... bash benchmarks/results/2026-12-02-h200-p/run5.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-p5
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_so2_kernels.py tests/test_so2_level3.py \
  -k "fused or sigma or level_3 or engages" > $OUT/pytest.txt 2>&1; echo "pytest exit $?" >> $OUT/pytest.txt
tail -3 $OUT/pytest.txt
for s in 3x32 6x32; do
  for p in bwd level3; do
    timeout 100 python3 -m tilefuse.cli tune --op so2_mixing_stack --shape $s --pass $p --force --no-progress \
      >> $OUT/tune-so2.txt 2>&1; echo "tune $s $p exit $?" >> $OUT/tune-so2.txt
  done
done
python3 -m tilefuse.cli tune --export-builtin $OUT >> $OUT/tune-so2.txt 2>&1
grep -E "^so2_mixing_stack  |exit" $OUT/tune-so2.txt
