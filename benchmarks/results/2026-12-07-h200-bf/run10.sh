#!/bin/bash
# Run 10 (GPU, any Hopper card): `tilefuse check --quick --no-bench` (every op's every path at
# the check's small shapes: partial tiles, ragged and empty experts, each recipe, layout and the
# table's configs) under compute-sanitizer's memcheck, with PyTorch's caching allocator off so
# that every tensor is an allocation of its own and a write past a tensor's end is caught
# (docs/design.md: out-of-bounds writes that neither crash nor show in the compared outputs were
# not caught). Exit 99 from the sanitizer: it reported an error.
#   OUT=... [LIMIT=seconds, default 480] [OPS=grouped_glu_mlp,so2_mixing_stack,dyt] bash benchmarks/results/2026-12-07-h200-bf/run10.sh
set -u
cd "$(dirname "$0")/../../.."
mkdir -p $OUT/run10
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader > $OUT/run10/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run10/gpu.txt
compute-sanitizer --version | tail -1 >> $OUT/run10/gpu.txt
cat $OUT/run10/gpu.txt
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d) PYTORCH_NO_CUDA_MEMORY_CACHING=1
timeout ${LIMIT:-480} compute-sanitizer --tool memcheck --error-exitcode 99 --print-limit 20 \
  python3 -m tilefuse.cli check --quick --no-bench --in-process --no-progress --ops ${OPS:-grouped_glu_mlp,so2_mixing_stack,dyt} \
  --out $OUT/run10/report > $OUT/run10/memcheck.txt 2>&1
echo "exit $? at ${SECONDS}s" >> $OUT/run10/memcheck.txt
grep -E "ERROR SUMMARY|Invalid|=========  *at|exit|PASS|FAIL" $OUT/run10/memcheck.txt | head -40 | cut -c1-200
tail -15 $OUT/run10/memcheck.txt | cut -c1-200
