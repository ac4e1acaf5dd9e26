#!/bin/bash
# Run 6 (prepared for the next device session, not run: this session's device time was spent).
# Issue 17's other two measurements on this folder's kernels, in one call (~6 min): the host cost
# per call against F.layer_norm and Liger-Kernel, then `tilefuse bench --ops dyt` (graph replay
# and the eager loop against torch.compile and Liger-Kernel at 2^26 elements); then the bf16
# backward keys this session did not re-sweep after dalpha's smaller accumulator. Carry .whl.
#   OUT=... bash benchmarks/results/2026-12-02-h200-n/run6.sh
set -u
cd "$(dirname "$0")/../../.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-run6
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a $OUT/gpu.txt
timeout 90 python3 benchmarks/host_overhead.py --sections peers 2>&1 | grep -v Warn | tee $OUT/host_overhead.txt
timeout 200 python3 -m tilefuse.cli bench --ops dyt --out $OUT/bench 2>&1 | grep -v Warn | tail -40 | tee $OUT/bench.txt
shapes=""; for w in 16 32 64 128 256 4096; do shapes="$shapes --shape $((67108864 / w))x$w"; done
timeout 200 python3 -m tilefuse.cli tune --op dyt --dtype bf16 --pass bwd $shapes --force --no-progress \
  > $OUT/tune-dyt.txt 2>&1; echo "tune exit $?" >> $OUT/tune-dyt.txt
python3 -m tilefuse.cli tune --export-builtin $OUT >> $OUT/tune-dyt.txt 2>&1
grep -E "^dyt  " $OUT/tune-dyt.txt
