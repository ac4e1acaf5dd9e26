#!/bin/bash
# Run 1: the dyt backward probe (timing table + ncu of each variant and of the forward at
# widths 4096 and 256, bf16, 2^26 elements), then the so2 sweep of three keys with the
# composition route among the candidates, exported.
#   OUT=... bash benchmarks/results/2026-12-01-h200-i/run1.sh
here="$(dirname "$0")"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache
python3 -m tilefuse.cli info > "$OUT/env.json" 2>&1
timeout 170 python3 "$here/run1_dyt_bwd_probe.py" > "$OUT/probe.txt" 2>&1; echo "probe exit $?" >> "$OUT/probe.txt"
for w in 4096 256; do
  timeout 90 ncu --clock-control none -k regex:"probe_bwd|dyt_bwd_cols|dyt_fwd" \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy \
    --section LaunchStats --section InstructionStats --section MemoryWorkloadAnalysis \
    python3 "$here/run1_dyt_bwd_probe.py" --ncu $w > "$OUT/ncu-$w.txt" 2>&1; echo "ncu exit $?" >> "$OUT/ncu-$w.txt"
done
timeout 270 python3 -m tilefuse.cli tune --op so2_mixing_stack --shape 3x32 --shape 6x32 --shape 2x64 \
  --force --rounds 6 --no-progress > "$OUT/tune-so2.txt" 2>&1; echo "tune exit $?" >> "$OUT/tune-so2.txt"
python3 -m tilefuse.cli tune --export-builtin "$OUT" >> "$OUT/tune-so2.txt" 2>&1
