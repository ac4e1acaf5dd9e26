#!/bin/bash
# Run 4: the sm_90 compile report under triton 3.6 (stack of the TMA dGLU with z through a
# descriptor), then run4_dglu.py.
cd "$(dirname "$0")/../../.."
export PYTHONPATH=$PWD/src
env -u TRITON_INTERPRET PYTHONPATH=$PWD/src:$PWD/tests timeout 200 python3 - <<'PY'
import sys
sys.path.insert(0, "tests")
import test_grouped_mlp_kernels as t
from sm90_helpers import run_compile_script
for k, v in run_compile_script(t._SM90_COMPILE).items():
    print(k, v)
PY
timeout 300 python3 benchmarks/results/2026-12-01-h200-l/run4_dglu.py
