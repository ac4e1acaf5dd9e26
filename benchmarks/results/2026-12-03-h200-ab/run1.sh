#!/bin/bash
# Run 1: run1_ws_rows.py (ws_rows.py against torch._grouped_mm: bits, float64, time a role).
#   OUT=... bash benchmarks/results/2026-12-03-h200-ab/run1.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-ab1
mkdir -p $OUT/run1
timeout 500 python3 benchmarks/results/2026-12-03-h200-ab/run1_ws_rows.py > $OUT/run1/ws-rows.txt 2>&1
echo "exit $?" >> $OUT/run1/ws-rows.txt
grep -v Warn $OUT/run1/ws-rows.txt | grep -v "^  ws\|^  CUTLASS" ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; git log --oneline | head -1
