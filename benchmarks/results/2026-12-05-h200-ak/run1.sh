#!/bin/bash
# Run 1 (GPU): fp8_block's Gluon weight gradients (ws_fp8_wgrad.py, new): their GPU tests and
# the ws kernels' (bits against grouped_wgrad_kernel), then wgrad.py (the kernel against the
# Triton launch and the bf16 wgrads; the whole op with each). Run from .snap/src: a snapshot of
# the committed tree plus this change, while another change was in progress in the checkout.
# Carry .whl (hypothesis, sortedcontainers) and .snap.
#   OUT=... bash benchmarks/results/2026-12-05-h200-ak/run1.sh
set -u
cd "$(dirname "$0")/../../.."
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/hypothesis-*.whl .whl/sortedcontainers-*.whl
export PYTHONUNBUFFERED=1 TILEFUSE_CACHE_DIR=$(mktemp -d)
mkdir -p $OUT/run1
(cd .snap && PYTHONPATH=/tmp/site:$PWD/src timeout 240 python3 -m pytest -q -x -p no:cacheprovider \
  tests/test_grouped_ws_fp8_wgrad.py tests/test_grouped_mlp_ws.py > $OUT/run1/tests.txt 2>&1; echo "exit $?" >> $OUT/run1/tests.txt)
tail -15 $OUT/run1/tests.txt
PYTHONPATH=$PWD/.snap/src timeout 300 python3 benchmarks/results/2026-12-05-h200-ak/wgrad.py > $OUT/run1/wgrad.txt 2>&1
echo "exit $?" >> $OUT/run1/wgrad.txt
cat $OUT/run1/wgrad.txt | tail -30
