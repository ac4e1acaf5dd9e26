#!/bin/bash
# Run 2 (GPU, any card): the check's parts in one child process, replaced after a crash: the
# isolation tests (the lost CUDA context included), then what isolation costs:
# `tilefuse check --quick` isolated on a fresh machine (cold Triton cache), then --in-process
# (warm), each timed by the report's wall_seconds.
#   OUT=... bash benchmarks/results/2026-12-06-h200-bc/run2.sh
set -u
cd "$(dirname "$0")/../../.."
mkdir -p $OUT/run2
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/run2/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" | tee -a $OUT/run2/gpu.txt
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  > /dev/null 2>&1 || echo "pip failed"
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d)
timeout 120 python3 -m pytest -q -p no:cacheprovider -rf tests/test_check_isolate.py > $OUT/run2/tests.txt 2>&1
echo "exit $? at ${SECONDS}s" >> $OUT/run2/tests.txt
tail -3 $OUT/run2/tests.txt
for mode in isolated in-process; do
  flag=$([ $mode = in-process ] && echo --in-process)
  timeout $((575 - SECONDS)) python3 -m tilefuse.cli check --quick --no-progress $flag --out $OUT/run2/$mode \
    > $OUT/run2/$mode.txt 2>&1
  echo "exit $? at ${SECONDS}s" >> $OUT/run2/$mode.txt
  grep -E "verification:|^report|exit" $OUT/run2/$mode.txt
done
