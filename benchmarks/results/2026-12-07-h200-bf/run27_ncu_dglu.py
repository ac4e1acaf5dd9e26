"""Run 27 (GPU): Nsight Compute on fp8_block's fc2 dgrad + dGLU at shape 2 (E 64, T 32768, H 2048,
F 1408, balanced counts, SwiGLU, interleave 32 with dz's fp8 copy): the ws launch
(ws_kernels.fp8_ws_gemm_kernel, both consumer warp groups on one 128-row tile) and run 26's
pp_dglu_kernel (each warp group its own 64-row tiles, out of phase), each called once to compile
and once profiled (--launch-skip 2 --launch-count 2 over the two kernels' names).

    ncu ... --kernel-name regex:"fp8_ws_gemm_kernel|pp_dglu_kernel" --launch-skip 2 --launch-count 2 \\
        python3 benchmarks/results/2026-12-07-h200-bf/run27_ncu_dglu.py
"""
import importlib.util
from pathlib import Path

import torch

from tilefuse.ops.grouped_glu_mlp import ws_kernels as W

_spec = importlib.util.spec_from_file_location("run26_pingpong", Path(__file__).with_name("run26_pingpong.py"))
PP = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(PP)

E, T, H, F = PP.SHAPES[2]
qa, qw, z, probs, counts = PP._problem(E, T, H, F, [T // E] * E, seed=27)
outs = {n: PP._outputs(T, F, True) for n in ("ws", "pp")}
for _ in range(2):
    o = outs["ws"]
    assert W.launch(qa, qw, o[0], counts, N=F, probs=probs, dglu=(z, o[1], 0, 32, o[2]))
    o = outs["pp"]
    assert PP.pp_launch(qa, qw, o[0], counts, N=F, probs=probs, dglu=(z, o[1], 0, 32, o[2]))
    torch.cuda.synchronize()
print("pp bitwise the ws launch:", PP._same(outs["ws"], outs["pp"]), flush=True)
