#!/bin/bash
# Run 4: the so2 GPU tests after the BWD_HEAD product's explicit rounding (run 3 stopped at its
# 170 s limit after one failure there); the dyt backward keys whose table config lost or gained
# most with the smaller dalpha accumulator (run 3) re-swept and exported; the dyt benchmark.
#   OUT=... bash benchmarks/results/2026-12-02-h200-n/run4.sh
set -u
cd "$(dirname "$0")/../../.."
here=benchmarks/results/2026-12-02-h200-n
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-run4
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a $OUT/gpu.txt
timeout 140 python3 -m pytest -q -p no:cacheprovider tests/test_so2_backward_weights.py tests/test_so2_kernels.py \
  tests/test_so2_forward_key.py tests/test_so2_level3.py > $OUT/pytest.txt 2>&1
echo "pytest exit $?" >> $OUT/pytest.txt; grep -E "passed|failed|FAILED|exit" $OUT/pytest.txt | tail -6
shapes=""; for w in 512 1024 2048 8192; do shapes="$shapes --shape $((67108864 / w))x$w"; done
timeout 130 python3 -m tilefuse.cli tune --op dyt --dtype bf16 --pass bwd $shapes --force --no-progress \
  > $OUT/tune-dyt.txt 2>&1; echo "tune bf16 exit $?" >> $OUT/tune-dyt.txt
shapes=""; for w in 256 1024 4096; do shapes="$shapes --shape $((67108864 / w))x$w"; done
timeout 100 python3 -m tilefuse.cli tune --op dyt --dtype fp32 --pass bwd $shapes --force --no-progress \
  >> $OUT/tune-dyt.txt 2>&1; echo "tune fp32 exit $?" >> $OUT/tune-dyt.txt
python3 -m tilefuse.cli tune --export-builtin $OUT >> $OUT/tune-dyt.txt 2>&1
grep -E "^dyt  " $OUT/tune-dyt.txt; grep exit $OUT/tune-dyt.txt
timeout 100 python3 $here/run2_dyt_bench.py --json $OUT/dyt_bench.json 2>&1 | grep -v Warn | tee $OUT/dyt_bench.txt
