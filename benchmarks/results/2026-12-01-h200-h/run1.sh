#!/bin/bash
# Run 1 (issue 15): the so2 level-3 (tf32x3) tests on the GPU, the level-3 sweep of the Neo key
# (L3-C32-x4-l3), then so2_peers at Neo with the level-3 peer. Carry .whl (DeePMD-kit etc.).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/src TILEFUSE_CACHE_DIR=$OUT/cache
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a $OUT/gpu.txt
git rev-parse HEAD 2>/dev/null | tee -a $OUT/gpu.txt
timeout 150 python3 -m pytest -q -p no:cacheprovider -x tests/test_so2_level3.py 2>&1 | tail -15 | tee $OUT/pytest.txt
timeout 200 python3 -m tilefuse.tuning.command --op so2_mixing_stack --shape 3x32 --pass level3 --rounds 6 2>&1 \
    | tail -30 | tee $OUT/sweep_l3.txt
python3 -c "
import json,sys; d=json.load(open(sys.argv[1]))
print(json.dumps(d['families']['so2_mixing_stack'], indent=1)[:3000])" $OUT/cache/*.json 2>&1 | tee $OUT/sweep_l3_entry.txt
timeout 240 python3 benchmarks/so2_peers.py --shapes 647000:3:32 --rounds 5 --deepmd-tiles h20 \
    --peers tilefuse,tilefuse-l3,compile,deepmd,deepmd-fp16x3 --json $OUT/neo.json 2>&1 | tail -25 | tee $OUT/peers_neo.txt
