"""so2_peers.py with the gate kernels' whole-tile dots at every focus_dim (configs.
GATE_REGISTER_MAX = 128: the code before the chunked dots, which the kernels keep below it).
Arguments: so2_peers.py's."""
import runpy
import sys

import triton.language as tl

from tilefuse.ops.so2_mixing_stack import configs, kernels, launch

configs.GATE_REGISTER_MAX = launch.GATE_REGISTER_MAX = 128
kernels.GATE_REGISTER_MAX = tl.constexpr(128)
sys.argv = ["so2_peers.py", *sys.argv[1:]]
runpy.run_path("benchmarks/so2_peers.py", run_name="__main__")
