#!/bin/bash
# Runs 4 and 5 in one machine session.   OUT=... bash benchmarks/results/2026-12-02-h200-t/run45.sh
cd "$(dirname "$0")"
bash run5.sh
bash run4.sh
