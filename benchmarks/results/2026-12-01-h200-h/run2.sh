#!/bin/bash
# Run 2 (issue 15): the 3xtf32 level-3 variant. GPU tests, level-3 sweeps of the spec's three
# keys and the exact sweep of L2-C64-x4 (not in the built-in table), then so2_peers at the three
# shapes with the level-3 peer, the force backward; and the training backward at Neo.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD/src TILEFUSE_CACHE_DIR=$OUT/cache
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a $OUT/gpu.txt
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/test_so2_level3.py 2>&1 | tail -15 | tee $OUT/pytest.txt
for s in 3x32 6x32 2x64; do
  timeout 150 python3 -m tilefuse.tuning.command --op so2_mixing_stack --shape $s --pass level3 --rounds 6 2>&1 \
      | grep -v Warning | tail -4 | tee -a $OUT/sweep_l3.txt
done
timeout 120 python3 -m tilefuse.tuning.command --op so2_mixing_stack --shape 2x64 --pass bwd --rounds 6 2>&1 \
    | tail -4 | tee -a $OUT/sweep_exact.txt
timeout 300 python3 benchmarks/so2_peers.py --shapes 647000:3:32,300000:6:32,400000:2:64 --rounds 5 --deepmd-tiles h20 \
    --peers tilefuse,tilefuse-l3,compile,deepmd,deepmd-fp16x3 --json $OUT/peers.json 2>&1 | grep -v Warn | tail -22 \
    | tee $OUT/peers.txt
timeout 120 python3 benchmarks/so2_peers.py --shapes 647000:3:32 --rounds 4 --training --peers tilefuse,tilefuse-l3,eager,compile \
    --json $OUT/training.json 2>&1 | tail -8 | tee $OUT/training.txt
