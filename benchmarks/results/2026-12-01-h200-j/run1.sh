#!/bin/bash
# Run 1: the dyt bf16 forward keys of the standard grid (2^26 elements, widths 16-8192) swept
# with the persistent prefetching forward among the candidates, exported; then
# `tilefuse bench --ops dyt` with the swept cache (graph replay, eager loop, host cost).
#   OUT=... bash benchmarks/results/2026-12-01-h200-j/run1.sh
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
python3 -m tilefuse.cli info > "$OUT/env.json" 2>&1
git rev-parse HEAD > "$OUT/commit.txt" 2>/dev/null; git status --short >> "$OUT/commit.txt" 2>/dev/null
shapes=""; for w in 16 32 64 128 256 512 1024 2048 4096 8192; do shapes="$shapes --shape $((67108864 / w))x$w"; done
timeout 320 python3 -m tilefuse.cli tune --op dyt --dtype bf16 --pass fwd $shapes --force --no-progress \
  > "$OUT/tune-dyt.txt" 2>&1; echo "tune exit $?" >> "$OUT/tune-dyt.txt"
python3 -m tilefuse.cli tune --export-builtin "$OUT" >> "$OUT/tune-dyt.txt" 2>&1
timeout 250 python3 -m tilefuse.cli bench --no-progress --ops dyt --out "$OUT/dyt" \
  > "$OUT/bench-dyt.txt" 2>&1; echo "bench exit $?" >> "$OUT/bench-dyt.txt"
