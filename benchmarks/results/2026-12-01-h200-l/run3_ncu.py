"""Run 3: Nsight Compute of the TMA roles that trail CUTLASS at shape 1 (8, 16384, 4096, 3584),
bf16, balanced counts: each launched once inside an NVTX range "prof" after a warm-up call
(compile), beside the matching torch._grouped_mm GEMM, and a plain store GEMM of the dGLU's
size (EPI_STORE, the dGLU's A and B, 128x128 tile) to separate its epilogue's cost.

    ncu --clock-control none --nvtx --nvtx-include "prof/" --section ... \\
        python3 benchmarks/results/2026-12-01-h200-l/run3_ncu.py
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import grouped_profile as gp  # noqa: E402
import torch  # noqa: E402
import triton  # noqa: E402

from tilefuse.ops.grouped_glu_mlp import launch  # noqa: E402
from tilefuse.ops.grouped_glu_mlp.configs import GemmConfig  # noqa: E402
from tilefuse.ops.grouped_glu_mlp.kernels import EPI_DGLU, EPI_GLU, EPI_STORE  # noqa: E402

E, T, H, F = gp.SHAPES[1]
counts, x, probs, w1, w2, dy = gp.problem(E, T, H, F)
offs = counts.cumsum(0).to(torch.int32)
z = torch.randn(T, 2 * F, device="cuda", dtype=torch.bfloat16)
h = torch.randn(T, F, device="cuda", dtype=torch.bfloat16)
dz, hout, dh = torch.randn_like(z), torch.empty_like(h), torch.empty_like(h)
dw1 = torch.empty_like(w1)
part = torch.empty(T, 2 * triton.cdiv(F, 64), device="cuda")
main = GemmConfig(128, 128, 64, 8, 4, 1, True)
dglu = GemmConfig(128, 64, 64, 8, 4, 1, True)
wgrad = GemmConfig(128, 128, 64, 8, 3, 1, True)
roles = {
    "glu": lambda: launch._gemm(EPI_GLU, x, w1, hout, counts, main, K=H, N=F,
                                b_strides=(w1.stride(0), w1.stride(2), w1.stride(1)), ldc=hout.stride(0), F=F,
                                probs=probs, z=z, act=0, interleave=32),
    "cutlass fc1": lambda: torch._grouped_mm(x, w1.transpose(-2, -1), offs=offs),
    "dglu": lambda: launch._gemm(EPI_DGLU, dy, w2, dz, counts, dglu, K=H, N=F,
                                 b_strides=(w2.stride(0), w2.stride(1), w2.stride(2)), ldc=dz.stride(0), F=F,
                                 probs=probs, z=z, part=part, act=0, interleave=32),
    "store of the dglu's size": lambda: launch._gemm(EPI_STORE, dy, w2, dh, counts, main, K=H, N=F,
                                                     b_strides=(w2.stride(0), w2.stride(1), w2.stride(2)),
                                                     ldc=dh.stride(0)),
    "cutlass dgrad2": lambda: torch._grouped_mm(dy, w2, offs=offs),
    "wgrad dW1": lambda: launch._wgrad(dz, x, dw1, counts, T, wgrad),
    "cutlass wgrad dW1": lambda: torch._grouped_mm(dz.t(), x, offs=offs),
}
for fn in roles.values():
    fn()
torch.cuda.synchronize()
for name, fn in roles.items():
    print("role:", name, flush=True)
    with torch.cuda.nvtx.range("prof"):
        fn()
    torch.cuda.synchronize()
