#!/bin/bash
# Run 4 (GPU, any card; prepared, not run this session): the isolation as it stands after run 3
# (the child's log protocol, tune's keys in the child): the two isolation test files (their
# GPU tests: a lost CUDA context through run_check, a real sweep through the child) and the
# files of the nn-module review's fixes (FX leaves running the kernels, jit.trace), then
# `tilefuse tune` of one dyt key through the child (--dry-run: nothing recorded) and
# `tilefuse check --quick --no-bench` isolated.
#   OUT=... bash benchmarks/results/2026-12-06-h200-bc/run4.sh
set -u
cd "$(dirname "$0")/../../.."
mkdir -p $OUT/run4
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/run4/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" | tee -a $OUT/run4/gpu.txt
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d)
timeout 300 python3 -m pytest -q -p no:cacheprovider -n 4 -rf tests/test_check_isolate.py tests/test_tuning_isolate.py \
  tests/test_fx_trace.py tests/test_eager_tracing.py tests/test_dyt_api.py tests/test_grouped_mlp_api.py \
  > $OUT/run4/tests.txt 2>&1
echo "exit $? at ${SECONDS}s" >> $OUT/run4/tests.txt
tail -4 $OUT/run4/tests.txt
timeout 200 python3 -m tilefuse.cli tune --op dyt --shape 65536x1024 --dtype bf16 --pass fwd --force --dry-run \
  --no-progress > $OUT/run4/tune.txt 2>&1
echo "exit $? at ${SECONDS}s" >> $OUT/run4/tune.txt
tail -6 $OUT/run4/tune.txt | cut -c1-220
timeout $((580 - SECONDS)) python3 -m tilefuse.cli check --quick --no-bench --no-progress --out $OUT/run4/check \
  > $OUT/run4/check.txt 2>&1
echo "exit $? at ${SECONDS}s" >> $OUT/run4/check.txt
grep -E "verification:|^report|exit" $OUT/run4/check.txt
