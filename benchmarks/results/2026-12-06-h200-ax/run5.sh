#!/bin/bash
# Run 5 (GPU, the H200 of runs 3-4, warm; carry .whl): so2_peers.py at (65536, 6, 96) and
# (65536, 6, 128), tilefuse with runs 3-4's entries (their cache, .tfcache-ak3) against
# torch.compile, 5 rounds. DeePMD-kit was asked for too but did not import (see README).
#   OUT=... bash benchmarks/results/2026-12-06-h200-ax/run5.sh
set -u
cd "$(dirname "$0")/../../.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl > /dev/null 2>&1
mkdir -p $OUT/run5
PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-ak3 timeout 420 \
  python3 benchmarks/so2_peers.py --shapes 65536:6:96,65536:6:128 --rounds 5 --target-ms 50 \
  --peers tilefuse,compile,deepmd --json $OUT/run5/peers.json 2>&1 | grep -v Warn > $OUT/run5/peers.txt
echo "exit ${PIPESTATUS[0]} at ${SECONDS}s" >> $OUT/run5/peers.txt
grep -E "^\| 65536|^exit" $OUT/run5/peers.txt
