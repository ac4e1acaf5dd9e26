#!/bin/bash
# Run 11 (GPU, any Hopper card): run 10's set-up (compute-sanitizer memcheck, PyTorch's caching
# allocator off) on run11_planted.py, a Triton kernel that stores one element past a tensor's
# end: memcheck must report it (exit 99), so that run 10's 0 errors mean something.
#   OUT=... bash benchmarks/results/2026-12-07-h200-bf/run11.sh
set -u
cd "$(dirname "$0")/../../.."
mkdir -p $OUT/run11
export PYTHONUNBUFFERED=1 PYTORCH_NO_CUDA_MEMORY_CACHING=1
python3 benchmarks/results/2026-12-07-h200-bf/run11_planted.py > $OUT/run11/plain.txt 2>&1
echo "exit $? (no sanitizer)" >> $OUT/run11/plain.txt
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 99 --print-limit 5 \
  python3 benchmarks/results/2026-12-07-h200-bf/run11_planted.py > $OUT/run11/memcheck.txt 2>&1
echo "exit $? (memcheck)" >> $OUT/run11/memcheck.txt
cat $OUT/run11/plain.txt; grep -E "Invalid|ERROR SUMMARY|exit|at one_past" $OUT/run11/memcheck.txt | head -8 | cut -c1-160
