#!/bin/bash
# Run 8 (GPU; ran 2026-12-05 with run 12 beside it, tree 036d3ad): the whole suite in
# benchmarks/gpu_tests.sh's processes as of 036d3ad (ten: the grouped, quant-so2 and "rest"
# processes in halves; `git show 036d3ad:benchmarks/gpu_tests.sh`; f81e027 went back to seven)
# at a 430 s limit (the session's device time was short), with `tilefuse check --no-bench`
# (run12.sh) running at the same time. After this folder's later changes: the kernels route's
# launches through SpecializingLaunchers (cd146f8, 6a3e781), and the 2026-12-05 sessions' CPU
# fixes. Carry .whl (hypothesis, sortedcontainers). Exactly what ran (the device returns 8 files
# at most, so the reports come back packed):
#   OUT=... bash benchmarks/results/2026-12-04-h200-aj/run8.sh
set -u
cd "$(dirname "$0")/../../.."
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/hypothesis-*.whl .whl/sortedcontainers-*.whl
export PYTHONPATH=/tmp/site:$PWD/src
D=benchmarks/results/2026-12-04-h200-aj
mkdir -p /tmp/o/run8
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader
OUT=/tmp/o bash $D/run12.sh > /tmp/o/run12.log 2>&1 &
P=$!
SECONDS=0
OUT=/tmp/o/run8 bash benchmarks/gpu_tests.sh 430
echo "suite $SECONDS s"
wait $P
echo "== run12"
cat /tmp/o/run12.log
tar czf $OUT/run8-12.tgz -C /tmp/o .
