#!/bin/bash
# Run 1 (GPU, any card): this session's changes and those of -bc run 4 (prepared, never run) on
# a GPU: the test files they touched (tilefuse.tune(model, isolate=True) through its child with
# the CUDA timer, a child that must not outlive its parent, the parent's warning filters in the
# child, FX leaves for the expert-parallel and HF modules, the CLI's refusals; -bc's isolation
# and nn-module review files; their GPU tests sweep through the child with the CUDA timer), then
# `tilefuse check --quick --no-bench` isolated. Within 340 s (the device time left).
#   OUT=... bash benchmarks/results/2026-12-06-h200-bd/run1.sh
set -u
cd "$(dirname "$0")/../../.."
mkdir -p $OUT/run1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/run1/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" | tee -a $OUT/run1/gpu.txt
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d)
timeout 200 python3 -m pytest -q -p no:cacheprovider -n 6 -rf tests/test_check_isolate.py tests/test_tuning_isolate.py \
  tests/test_fx_trace.py tests/test_eager_tracing.py tests/test_dyt_api.py tests/test_grouped_mlp_api.py \
  tests/test_cli_packaging.py tests/test_hf_adapter.py tests/test_expert_parallel.py tests/test_dyt_functorch.py \
  > $OUT/run1/tests.txt 2>&1
echo "exit $? at ${SECONDS}s" >> $OUT/run1/tests.txt
tail -6 $OUT/run1/tests.txt
timeout $((340 - SECONDS)) python3 -m tilefuse.cli check --quick --no-bench --no-progress --out $OUT/run1/check \
  > $OUT/run1/check.txt 2>&1
echo "exit $? at ${SECONDS}s" >> $OUT/run1/check.txt
grep -E "verification:|^report|exit" $OUT/run1/check.txt
rm -f $OUT/run1/check/*.png
