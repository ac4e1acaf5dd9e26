#!/bin/bash
# Run 3 (GPU, H100; ran inline on the warm machine after run 1, in its extracted tree /tmp/h2,
# so one cache folder holds runs 1 and 3's keys): the level-3 keys of (6, 96) and (6, 128),
# at 2^17 edges on 80 GB (docs/tuning.md).
#   OUT=... bash benchmarks/results/2026-12-05-h200-av/run3.sh
cd "$(dirname "$0")/../../.."
OUT=$OUT bash benchmarks/results/2026-12-05-h200-ak/run3.sh 6x96:level3:180 6x128:level3:215
