#!/bin/bash
# Run 4 (GPU; prepared): the so2_mixing_stack training backward (forward + backward with the
# weights' gradients) at level 3 now that the H200 table's 3x32 and 6x32 level-3 entries are
# validated for it (-aj run 10), against the exact path and torch.compile of the reference, at
# Neo (647000, 3, 32) and (300000, 6, 32); each checked against float64 at full E first
# (benchmarks/so2_peers.py --training). 5 interleaved rounds.
#   OUT=... bash benchmarks/results/2026-12-05-h200-ak/run4.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d)
mkdir -p $OUT/run4
timeout 540 python3 benchmarks/so2_peers.py --training --rounds 5 --shapes neo,300000:6:32 \
  --peers tilefuse,tilefuse-l3,compile --json $OUT/run4/training.json 2>&1 | grep -v Warn > $OUT/run4/training.txt
echo "exit ${PIPESTATUS[0]}" >> $OUT/run4/training.txt
grep -E "^\| [0-9]|exit" $OUT/run4/training.txt | tail -12
