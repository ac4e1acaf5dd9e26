#!/bin/bash
# Run 1 (GPU): issue 17's probe, DyT as a C++ autograd node launching tilefuse's compiled
# kernels (dyt_node.cpp, dyt_node_probe.py): build time, bits against tilefuse.dyt, host cost
# per call against F.layer_norm. Needs a C++ compiler; ninja comes from .whl when missing.
#   OUT=... bash benchmarks/results/2026-12-04-h200-af/run1.sh   (carry: .whl)
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d) TORCH_EXTENSIONS_DIR=$(mktemp -d)
mkdir -p $OUT/run1
{
  nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader
  python3 -c "import torch, triton, sys; print(sys.version.split()[0], torch.__version__, triton.__version__)"
  echo "c++: $(command -v c++ g++ | head -1)  ninja: $(command -v ninja)"
} > $OUT/run1/env.txt 2>&1
if ! command -v ninja > /dev/null; then
  python3 -m pip install -q --no-deps --target /tmp/nj .whl/ninja-*.whl >> $OUT/run1/env.txt 2>&1
  export PATH=/tmp/nj/bin:$PATH PYTHONPATH=$PYTHONPATH:/tmp/nj
  echo "ninja from .whl: $(command -v ninja) $(ninja --version)" >> $OUT/run1/env.txt 2>&1
fi
cat $OUT/run1/env.txt
timeout 400 python3 benchmarks/results/2026-12-04-h200-af/dyt_node_probe.py --rounds 7 > $OUT/run1/probe.txt 2>&1
echo "exit $?" >> $OUT/run1/probe.txt
tail -40 $OUT/run1/probe.txt
