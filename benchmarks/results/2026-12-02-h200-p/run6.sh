#!/bin/bash
# Run 6 (prepared, not run): L2-C64 re-swept as run 5 swept L3-C32 / L6-C32 (into the same
# TILEFUSE_CACHE_DIR, so the export holds all three keys), then so2_peers.py at the three shapes
# on that table against DeePMD-kit and torch.compile. Carry .whl (DeePMD-kit 3.2.0 and its
# dependencies). Run in the same machine session as run 5 (its cache folder is read here).
#   OUT=... bash benchmarks/results/2026-12-02-h200-p/run6.sh
set -u
cd "$(dirname "$0")/../../.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-p5
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
for p in bwd level3; do
  timeout 170 python3 -m tilefuse.cli tune --op so2_mixing_stack --shape 2x64 --pass $p --force --no-progress \
    >> $OUT/tune-so2.txt 2>&1; echo "tune 2x64 $p exit $?" >> $OUT/tune-so2.txt
done
python3 -m tilefuse.cli tune --export-builtin $OUT >> $OUT/tune-so2.txt 2>&1
grep -E "^so2_mixing_stack  |exit" $OUT/tune-so2.txt
timeout 200 python3 benchmarks/so2_peers.py --shapes 647000:3:32,300000:6:32,400000:2:64 --rounds 4 \
  --deepmd-tiles h20 --peers tilefuse,tilefuse-l3,compile,deepmd,deepmd-fp16x3 --json $OUT/peers.json 2>&1 \
  | grep -v Warn | tail -19 | tee $OUT/peers.txt
