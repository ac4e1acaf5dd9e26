#!/bin/bash
# Run 8 (prepared, not run): the so2 L2-C64 exact backward key re-swept on the current kernels
# (its sweep ran past 170 s in 2026-12-02-h200-p run 6 and keeps its 2026-12-01 entry), then
# exported; alone in its call, with room to finish.
#   OUT=... bash benchmarks/results/2026-12-02-h200-r/run8.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-r8
mkdir -p $OUT/run8
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run8/gpu.txt
timeout 520 python3 -m tilefuse.cli tune --op so2_mixing_stack --shape 2x64 --pass bwd --force --no-progress \
  > $OUT/run8/tune-so2.txt 2>&1; echo "tune 2x64 bwd exit $?" >> $OUT/run8/tune-so2.txt
python3 -m tilefuse.cli tune --export-builtin $OUT/run8 >> $OUT/run8/tune-so2.txt 2>&1
grep -E "^so2_mixing_stack  |exit" $OUT/run8/tune-so2.txt
