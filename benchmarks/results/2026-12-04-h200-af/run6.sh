#!/bin/bash
# Run 6 (GPU): run 5's failing test after its fix (the check's fused-vs-relay test on the device's tensors).
#   OUT=... bash benchmarks/results/2026-12-04-h200-af/run6.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d)
mkdir -p $OUT/run6
timeout 200 python3 -m pytest -q -p no:cacheprovider -rfs --tb=short tests/test_check.py -k "fused_check_forces" > $OUT/run6/pytest-check.txt 2>&1
grep -E "^(FAILED|ERROR)|^E " $OUT/run6/pytest-check.txt | head; tail -1 $OUT/run6/pytest-check.txt
