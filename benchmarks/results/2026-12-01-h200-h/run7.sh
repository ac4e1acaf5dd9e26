#!/bin/bash
# Run 7 (issue 15): where does tilefuse's so2 step go at (400000, 2, 64), against DeePMD-kit's?
# (torch.profiler per-kernel table of so2_peers.py). Carry .whl.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/src TILEFUSE_CACHE_DIR=$OUT/cache
timeout 200 python3 benchmarks/so2_peers.py --shapes 400000:2:64 --rounds 3 --deepmd-tiles h20 --peers tilefuse,deepmd \
    --profile --profile-top 12 --json $OUT/s3.json 2>&1 | grep -v Warn | tee $OUT/profile_s3.txt | tail -60
