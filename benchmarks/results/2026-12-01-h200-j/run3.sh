#!/bin/bash
# Run 3 (issue 15): the so2 forward keys of the spec's three shapes swept (the forward's tiles,
# f126982), exported; so2_peers at the three shapes with those winners (the backward from the
# built-in table), profile at (400000, 2, 64); then the whole GPU suite (benchmarks/gpu_tests.sh).
#   OUT=... bash benchmarks/results/2026-12-01-h200-j/run3.sh
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/src
TILEFUSE_CACHE_DIR=$PWD/.tfcache timeout 170 python3 -m tilefuse.cli tune --op so2_mixing_stack --pass fwd \
  --shape 3x32 --shape 6x32 --shape 2x64 --force --rounds 6 --no-progress > "$OUT/tune-so2-fwd.txt" 2>&1
echo "tune exit $?" >> "$OUT/tune-so2-fwd.txt"
TILEFUSE_CACHE_DIR=$PWD/.tfcache python3 -m tilefuse.cli tune --export-builtin "$OUT" >> "$OUT/tune-so2-fwd.txt" 2>&1
TILEFUSE_CACHE_DIR=$PWD/.tfcache timeout 170 python3 benchmarks/so2_peers.py --shapes 647000:3:32,300000:6:32,400000:2:64 \
  --rounds 5 --deepmd-tiles h20 --peers tilefuse,compile,deepmd --profile --profile-shape 400000:2:64 \
  --profile-peers tilefuse --profile-top 8 --json "$OUT/peers.json" 2>&1 | grep -v Warn > "$OUT/peers.txt"
echo "peers exit ${PIPESTATUS[0]}" >> "$OUT/peers.txt"
bash benchmarks/gpu_tests.sh 235 > "$OUT/gpu-tests.txt" 2>&1; echo "gpu_tests exit $?" >> "$OUT/gpu-tests.txt"
