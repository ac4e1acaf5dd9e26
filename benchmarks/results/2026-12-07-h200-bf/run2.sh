#!/bin/bash
# Run 2 (GPU, any card; carry .whl): this session's fixes on the GPU: the test files they
# touched (role_mismatch's poisoning and NaN in any output, compile_limits, the eager Liger rows,
# expert_parallel.py's gradient check; the sweep's compile errors, family errors and
# sweep_candidates; the level-3 validation's range sets; the streams' fork before every join, with
# its capture test also run on the tree before the fix, .snap/old.tar, where it must fail),
# 6 xdist workers; then run2_liger_eager.py,
# Liger-Kernel's fused MoE step under graph capture and eagerly beside the op as called.
#   OUT=... [LIMIT=seconds, default 560] [QUICK=1: the streams tests alone, no Liger] bash benchmarks/results/2026-12-07-h200-bf/run2.sh
set -u
cd "$(dirname "$0")/../../.."
mkdir -p $OUT/run2
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader | tee $OUT/run2/gpu.txt
python3 -m pip install --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  > $OUT/run2/pip.txt 2>&1
echo "pip exit $?" >> $OUT/run2/pip.txt
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d)
if [ -n "${QUICK:-}" ]; then   # the streams fix's GPU tests alone (a short device budget)
  timeout $((${LIMIT:-560} - 140)) python3 -m pytest -q -p no:cacheprovider -rfs tests/test_grouped_plan.py \
    tests/test_grouped_compose.py -k "stream or join or fork or falls_back or beside" > $OUT/run2/tests.txt 2>&1
else
timeout $((${LIMIT:-560} - 140)) python3 -m pytest -q -p no:cacheprovider -n 6 -rfs tests/test_check.py tests/test_benchmark_checks.py \
  tests/test_tuning_sweep.py tests/test_grouped_mlp_ws.py tests/test_so2_level3.py tests/test_grouped_plan.py \
  tests/test_grouped_compose.py > $OUT/run2/tests.txt 2>&1
fi
echo "exit $? at ${SECONDS}s" >> $OUT/run2/tests.txt
tail -8 $OUT/run2/tests.txt
# the capture test on the streams code before a4f909c (.snap/old.tar: that tree's src): must fail
if [ -f .snap/old.tar ]; then
  mkdir -p /tmp/old && tar -xf .snap/old.tar -C /tmp/old
  PYTHONPATH=/tmp/site:/tmp/old/src timeout 120 python3 -m pytest -q -p no:cacheprovider -rf \
    tests/test_grouped_plan.py -k falls_back_captures > $OUT/run2/old_capture.txt 2>&1
  echo "exit $? (1 expected: the old join without a fork)" >> $OUT/run2/old_capture.txt
  grep -E "Error|passed|failed|exit" $OUT/run2/old_capture.txt | tail -4 | cut -c1-300
fi
[ -n "${QUICK:-}" ] && exit 0
timeout $((${LIMIT:-560} - SECONDS)) python3 benchmarks/results/2026-12-07-h200-bf/run2_liger_eager.py > $OUT/run2/liger.txt 2>&1
echo "exit $? at ${SECONDS}s" >> $OUT/run2/liger.txt
grep -v Warn $OUT/run2/liger.txt | tail -12 | cut -c1-300
