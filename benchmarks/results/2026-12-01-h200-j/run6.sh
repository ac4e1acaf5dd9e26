#!/bin/bash
# Run 6 (prepared; not run in this folder's session): the so2 forward keys of the other three
# grid shapes (L1-C32, L2-C32, L3-C64) swept, exported; so2_peers at the spec's three shapes;
# `tilefuse bench --ops dyt` with the table's re-swept 4096 / 8192 forward entries.
#   OUT=... bash benchmarks/results/2026-12-01-h200-j/run6.sh     (carry .whl)
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache
timeout 150 python3 -m tilefuse.cli tune --op so2_mixing_stack --pass fwd --shape 1x32 --shape 2x32 --shape 3x64 \
  --force --rounds 6 --no-progress > "$OUT/tune-so2-fwd.txt" 2>&1; echo "tune exit $?" >> "$OUT/tune-so2-fwd.txt"
python3 -m tilefuse.cli tune --export-builtin "$OUT" >> "$OUT/tune-so2-fwd.txt" 2>&1
timeout 170 python3 benchmarks/so2_peers.py --shapes 647000:3:32,300000:6:32,400000:2:64 --rounds 5 \
  --deepmd-tiles h20 --peers tilefuse,compile,deepmd --json "$OUT/peers.json" 2>&1 | grep -v Warn > "$OUT/peers.txt"
echo "peers exit ${PIPESTATUS[0]}" >> "$OUT/peers.txt"
timeout 250 python3 -m tilefuse.cli bench --no-progress --ops dyt --out "$OUT/dyt" > "$OUT/bench-dyt.txt" 2>&1
echo "bench exit $?" >> "$OUT/bench-dyt.txt"
