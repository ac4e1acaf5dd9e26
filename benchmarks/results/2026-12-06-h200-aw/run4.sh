#!/bin/bash
# Run 4 (GPU; ran inline after run 3 on the warm machine, in run 3's extracted tree, carrying
# .whl): so2_peers.py at 65,536 edges, (6, 96) and (6, 128), tilefuse and torch.compile only,
# 7 interleaved rounds, and torch.profiler's kernel times of both at (6, 96).
#   OUT=... bash benchmarks/results/2026-12-06-h200-aw/run4.sh
cd "$(dirname "$0")/../../.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d)
mkdir -p $OUT/run4
timeout 220 python3 benchmarks/so2_peers.py --shapes 65536:6:96,65536:6:128 --rounds 7 --target-ms 50 \
  --peers tilefuse,compile --profile --profile-shape 65536:6:96 --profile-peers tilefuse,compile --profile-top 14 \
  --json $OUT/run4/peers.json 2>&1 | grep -v Warn > $OUT/run4/peers.txt
echo "exit ${PIPESTATUS[0]} at ${SECONDS}s" >> $OUT/run4/peers.txt
grep -v python_packages $OUT/run4/peers.txt | tail -60
