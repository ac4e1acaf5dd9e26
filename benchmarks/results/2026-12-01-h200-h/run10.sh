#!/bin/bash
# Run 10 (issue 15): so2_peers at the three spec shapes after the sigma kernel's launch-shape fix
# (runs 7-8). Carry .whl.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/src TILEFUSE_CACHE_DIR=$OUT/cache
timeout 300 python3 benchmarks/so2_peers.py --shapes 647000:3:32,300000:6:32,400000:2:64 --rounds 5 --deepmd-tiles h20 \
    --peers tilefuse,compile,deepmd,deepmd-fp16x3 --profile --profile-shape 400000:2:64 --profile-peers tilefuse \
    --profile-top 8 --json $OUT/peers.json 2>&1 | grep -v Warn | tee $OUT/peers.txt | tail -32
