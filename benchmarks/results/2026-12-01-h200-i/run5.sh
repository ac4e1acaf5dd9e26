#!/bin/bash
# Run 5: the other three so2 keys of the standard grid swept with the composition route among
# the candidates, exported (run as one inline command; this script is that command).
#   OUT=... bash benchmarks/results/2026-12-01-h200-i/run5.sh
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache
timeout 215 python3 -m tilefuse.cli tune --op so2_mixing_stack --shape 1x32 --shape 2x32 --shape 3x64 --force \
  --rounds 6 --no-progress > "$OUT/tune-so2b.txt" 2>&1; echo "tune exit $?" >> "$OUT/tune-so2b.txt"
python3 -m tilefuse.cli tune --export-builtin "$OUT" >> "$OUT/tune-so2b.txt" 2>&1
