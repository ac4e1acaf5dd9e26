#!/bin/bash
# Run 9 (GPU; prepared): so2_mixing_stack against its peers at the spec's three shapes,
# interleaved (~100 ms samples) and sustained (2 s blocks, so2_peers.py --sustained), in two
# processes: tilefuse exact and level 3, torch.compile, DeePMD-kit fp32 and fp16x3 (H20
# tiles). Are the exact path's 1.01-1.03x and level 3's 1.18-1.33x DeePMD-kit (-x) the same
# at each provider's own clock under the 700 W cap? Needs .whl with DeePMD-kit 3.2.0 and its
# pure-Python dependencies (python3 benchmarks/device_wheels.py fills .whl); without it the DeePMD peers print as
# unavailable and the rest still runs.
#   OUT=... bash benchmarks/results/2026-12-04-h200-aj/run9.sh
set -u
cd "$(dirname "$0")/../../.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d)
mkdir -p $OUT/run9
PEERS=tilefuse,tilefuse-l3,compile,deepmd,deepmd-fp16x3
timeout 200 python3 benchmarks/so2_peers.py --rounds 5 --deepmd-tiles h20 --peers $PEERS \
  --json $OUT/run9/interleaved.json 2>&1 | grep -v Warn > $OUT/run9/interleaved.txt
echo "exit ${PIPESTATUS[0]}" >> $OUT/run9/interleaved.txt
grep -E "^\| [0-9]|exit" $OUT/run9/interleaved.txt | tail -16
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,clocks_throttle_reasons.active --format=csv,noheader \
  -lms 200 > $OUT/run9/smi.csv 2>&1 &
SMI=$!
timeout 330 python3 benchmarks/so2_peers.py --rounds 3 --sustained --deepmd-tiles h20 --peers $PEERS \
  --json $OUT/run9/sustained.json 2>&1 | grep -v Warn > $OUT/run9/sustained.txt
echo "exit ${PIPESTATUS[0]}" >> $OUT/run9/sustained.txt
kill $SMI
grep -E "^\| [0-9]|exit" $OUT/run9/sustained.txt | tail -16
