#!/bin/bash
# Run 2: the dyt bf16 backward keys of the standard grid (2^26 elements, widths 16-8192)
# re-swept with the PREFETCH candidates, exported; then the prefetch tests on the GPU.
#   OUT=... bash benchmarks/results/2026-12-01-h200-i/run2.sh
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache
shapes=""; for w in 16 32 64 128 256 512 1024 2048 4096 8192; do shapes="$shapes --shape $((67108864 / w))x$w"; done
timeout 430 python3 -m tilefuse.cli tune --op dyt --dtype bf16 --pass bwd $shapes --force --no-progress \
  > "$OUT/tune-dyt.txt" 2>&1; echo "tune exit $?" >> "$OUT/tune-dyt.txt"
python3 -m tilefuse.cli tune --export-builtin "$OUT" >> "$OUT/tune-dyt.txt" 2>&1
timeout 100 python3 -m pytest -q -p no:cacheprovider tests/test_dyt.py -k "prefetch or channels_last" \
  > "$OUT/pytest-dyt.txt" 2>&1; echo "pytest exit $?" >> "$OUT/pytest-dyt.txt"
