#!/bin/bash
# Run 3 (GPU, prepared; the H100 whose table holds the (6, 96) / (6, 128) keys, or an H200;
# carry .whl: DeePMD-kit 3.2.0 and its pure-Python dependencies): so2_peers.py at 65,536 edges,
# (6, 96) and (6, 128), forward + force backward, fp32, F 2: tilefuse as shipped, torch.compile
# of the reference (never timed at lmax 6: its compiles ran past the calls before) and
# DeePMD-kit fp32, interleaved, each checked against float64 first.
#   OUT=... bash benchmarks/results/2026-12-06-h200-aw/run3.sh [LIMIT_S]
set -u
cd "$(dirname "$0")/../../.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d)
mkdir -p $OUT/run3
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/run3/gpu.txt
timeout ${1:-540} python3 benchmarks/so2_peers.py --shapes 65536:6:96,65536:6:128 --rounds 3 --target-ms 50 \
  --peers tilefuse,compile,deepmd --deepmd-tiles default --json $OUT/run3/peers.json 2>&1 \
  | while IFS= read -r line; do echo "[${SECONDS}s] $line"; done | grep -v Warn > $OUT/run3/peers.txt
echo "exit ${PIPESTATUS[0]} at ${SECONDS}s" >> $OUT/run3/peers.txt
grep -E "\| |exit|FAIL|rror|ran" $OUT/run3/peers.txt | tail -24
