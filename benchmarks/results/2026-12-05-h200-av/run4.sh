#!/bin/bash
# Run 4 (GPU, H100; ran inline after run 3 in the same tree, carrying .whl: DeePMD-kit 3.2.0 and
# its pure-Python dependencies, python3 benchmarks/device_wheels.py): so2_peers.py at 65,536
# edges, (6, 96) and (6, 128), forward + force backward, fp32, F 2: tilefuse with the entries of
# runs 1 and 3 (their cache folder; the built-in table then lacked them), the eager reference
# and DeePMD-kit fp32, interleaved, each checked against float64 first. Same command as
# 2026-12-05-h200-at run 5's "after" rows.
#   OUT=... bash benchmarks/results/2026-12-05-h200-av/run4.sh
cd "$(dirname "$0")/../../.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-ak3
mkdir -p $OUT/run4
timeout 200 python3 benchmarks/so2_peers.py --shapes 65536:6:96,65536:6:128 --rounds 3 --target-ms 50 \
  --peers tilefuse,eager,deepmd --deepmd-tiles default --json $OUT/run4/peers.json 2>&1 | grep -v Warn > $OUT/run4/peers.txt
echo "exit ${PIPESTATUS[0]} at ${SECONDS}s" >> $OUT/run4/peers.txt
grep -E "^\| |exit|FAIL|rror|ran" $OUT/run4/peers.txt | tail -20
