#!/bin/bash
# Run 1 (GPU): fp8_block's ws store GEMM with two K chunks in flight a consumer (ws_kernels
# OVERLAP) against the shipped one-at-a-time schedule: per role, bits and time; the GPU tests of
# tests/test_grouped_mlp_ws.py (both schedules bitwise grouped_gemm_kernel); the op as called;
# then the prepared -ah run 6 (the second stream's fork and join variants, host time).
#   OUT=... bash benchmarks/results/2026-12-04-h200-ai/run1.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d)
D=benchmarks/results/2026-12-04-h200-ai
mkdir -p $OUT/run1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $OUT/run1/gpu.txt 2>&1
timeout 150 python3 $D/ws_overlap_roles.py --rounds 7 > $OUT/run1/roles.txt 2>&1; echo "exit $?" >> $OUT/run1/roles.txt
cat $OUT/run1/roles.txt
timeout 150 python3 -m pytest -q -p no:cacheprovider -rfs --tb=short tests/test_grouped_mlp_ws.py -k "not compiles" \
  > $OUT/run1/pytest-ws.txt 2>&1; echo "exit $?" >> $OUT/run1/pytest-ws.txt
tail -3 $OUT/run1/pytest-ws.txt
timeout 200 python3 $D/as_called_overlap.py --providers "tilefuse,fp8_block" --shapes 1,2,3 --interleaves 32 \
  --rounds 5 --profile none > $OUT/run1/as_called.txt 2>&1; echo "exit $?" >> $OUT/run1/as_called.txt
grep -v "^  *$" $OUT/run1/as_called.txt | tail -25
mkdir -p $OUT/run6
timeout 120 python3 benchmarks/results/2026-12-04-h200-ah/host_fork_variants.py > $OUT/run6/host.txt 2>&1
echo "exit $?" >> $OUT/run6/host.txt
cat $OUT/run6/host.txt
