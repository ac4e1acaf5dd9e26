#!/bin/bash
# Run 5: run5_dyt_bound_probe.py (the dyt channels-last 37x48 16-bit cases with many fresh seeds).
#   OUT=... bash benchmarks/results/2026-12-01-h200-j/run5.sh
here="$(dirname "$0")"
PYTHONPATH=$PWD/src:$PWD/tests timeout 75 python3 "$here/run5_dyt_bound_probe.py" 50 > "$OUT/probe.txt" 2>&1
echo "probe exit $?" >> "$OUT/probe.txt"
