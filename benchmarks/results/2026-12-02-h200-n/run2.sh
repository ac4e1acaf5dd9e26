#!/bin/bash
# Run 2: the dyt bf16 keys whose space grew (forward at 1024-8192 columns: persistent programs 8
# and 16 an SM; backward at 16 columns: 512-row tiles) re-swept and exported, then the bf16
# benchmark on that table; so2_mixing_stack against DeePMD-kit at the three shapes with the
# gate and pointwise kernels' own launch shape (32 rows, 2 warps). Carry .whl.
#   OUT=... bash benchmarks/results/2026-12-02-h200-n/run2.sh
set -u
cd "$(dirname "$0")/../../.."
here=benchmarks/results/2026-12-02-h200-n
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-run2
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a $OUT/gpu.txt
shapes=""; for w in 1024 2048 4096 8192; do shapes="$shapes --shape $((67108864 / w))x$w"; done
timeout 170 python3 -m tilefuse.cli tune --op dyt --dtype bf16 --pass fwd $shapes --force --no-progress \
  > $OUT/tune-dyt.txt 2>&1; echo "tune fwd exit $?" >> $OUT/tune-dyt.txt
timeout 50 python3 -m tilefuse.cli tune --op dyt --dtype bf16 --pass bwd --shape 4194304x16 --force --no-progress \
  >> $OUT/tune-dyt.txt 2>&1; echo "tune bwd exit $?" >> $OUT/tune-dyt.txt
python3 -m tilefuse.cli tune --export-builtin $OUT >> $OUT/tune-dyt.txt 2>&1
grep -A8 "^family" $OUT/tune-dyt.txt; grep "exit" $OUT/tune-dyt.txt
timeout 80 python3 $here/run2_dyt_bench.py --dtypes bf16 --json $OUT/dyt_bench.json 2>&1 | grep -v Warn | tee $OUT/dyt_bench.txt
timeout 250 python3 benchmarks/so2_peers.py --shapes 647000:3:32,300000:6:32,400000:2:64 --rounds 4 \
  --deepmd-tiles h20 --peers tilefuse,tilefuse-l3,deepmd,deepmd-fp16x3 --json $OUT/peers.json 2>&1 \
  | grep -v Warn | tail -16 | tee $OUT/peers.txt
