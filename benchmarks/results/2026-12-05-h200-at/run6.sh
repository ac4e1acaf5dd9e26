#!/bin/bash
# Run 6 (GPU, ran inline; H100, on run 5's warm machine): the (6, 96) and (6, 128) forward keys
# swept again with the chunked gate dots (their run-2/3 entries were measured on the spilling
# kernels), by -ak's run3.sh; the export holds them.
#   OUT=... bash benchmarks/results/2026-12-05-h200-at/run6.sh
set -u
cd "$(dirname "$0")/../../.."
mkdir -p $OUT/run6; OUT=$OUT bash benchmarks/results/2026-12-05-h200-ak/run3.sh 6x96:fwd:75 6x128:fwd:85; mv $OUT/run3/* $OUT/run6/
