#!/bin/bash
# Run 6 (GPU, prepared; the H100, whose table holds the lmax-6 keys; carry .whl): the forward's
# composition route (cuBLAS layer GEMMs) in the (6, 96) forward key's sweep against the tilings
# (`tilefuse tune --pass fwd --force`, 2^18 edges on an 80 GB card), then so2_peers.py at
# (65536, 6, 96), tilefuse with that sweep's entry against torch.compile, 7 rounds.
#   OUT=... bash benchmarks/results/2026-12-06-h200-aw/run6.sh
set -u
cd "$(dirname "$0")/../../.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-aw6
mkdir -p $OUT/run6
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/run6/gpu.txt
timeout 150 python3 -m tilefuse.cli tune --op so2_mixing_stack --shape 6x96 --pass fwd --force --no-progress \
  > $OUT/run6/tune-so2.txt 2>&1
echo "tune exit $? at ${SECONDS}s" >> $OUT/run6/tune-so2.txt
python3 -m tilefuse.cli tune --export-builtin $OUT/run6 > /dev/null 2>&1
grep -v "^\s*$" $OUT/run6/tune-so2.txt | tail -14
timeout 80 python3 benchmarks/so2_peers.py --shapes 65536:6:96 --rounds 7 --target-ms 50 --peers tilefuse,compile \
  --json $OUT/run6/peers.json 2>&1 | grep -v Warn > $OUT/run6/peers.txt
echo "exit ${PIPESTATUS[0]} at ${SECONDS}s" >> $OUT/run6/peers.txt
grep -E "^\| 65536|^exit" $OUT/run6/peers.txt
