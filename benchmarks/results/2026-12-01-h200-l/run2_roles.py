"""Run 2: the three roles that trail CUTLASS after run 1 (fc1 + GLU, fc2 dgrad + dGLU, the
weight gradients), through TMA at more tiles, against torch._grouped_mm, bf16, balanced
counts, the spec's three shapes. Reuses benchmarks/grouped_profile.py's harness.

    PYTHONPATH=src python3 benchmarks/results/2026-12-01-h200-l/run2_roles.py
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import grouped_profile as gp  # noqa: E402
import torch  # noqa: E402
import triton  # noqa: E402

from tilefuse.ops.grouped_glu_mlp import launch  # noqa: E402
from tilefuse.ops.grouped_glu_mlp.configs import GemmConfig  # noqa: E402
from tilefuse.ops.grouped_glu_mlp.kernels import EPI_DGLU, EPI_GLU  # noqa: E402

T_ = True
GLU = [GemmConfig(128, 128, 64, 8, 4, 1, T_), GemmConfig(128, 64, 64, 4, 4, 2, T_), GemmConfig(64, 128, 64, 4, 3, 2, T_),
       GemmConfig(128, 64, 64, 8, 4, 1, T_), GemmConfig(128, 128, 32, 8, 6, 1, T_)]
DGLU = [GemmConfig(128, 64, 64, 8, 4, 1, T_), GemmConfig(64, 64, 64, 4, 4, 2, T_), GemmConfig(128, 64, 64, 4, 4, 2, T_),
        GemmConfig(64, 64, 64, 4, 3, 3, T_), GemmConfig(128, 32, 64, 4, 4, 2, T_)]
WGRAD = [GemmConfig(128, 128, 64, 8, 3, 1, T_), GemmConfig(128, 128, 64, 8, 2, 1, T_), GemmConfig(64, 128, 64, 4, 3, 1, T_),
         GemmConfig(128, 64, 64, 4, 4, 1, T_), GemmConfig(128, 128, 128, 8, 2, 1, T_)]


def main():
    print(f"torch {torch.__version__}, triton {triton.__version__}, {torch.cuda.get_device_name()}")
    for E, T, H, F in (gp.SHAPES[1], gp.SHAPES[3], gp.SHAPES[2]):
        counts, x, probs, w1, w2, dy = gp.problem(E, T, H, F)
        offs = counts.cumsum(0).to(torch.int32)
        z = torch.randn(T, 2 * F, device="cuda", dtype=torch.bfloat16)
        h = torch.randn(T, F, device="cuda", dtype=torch.bfloat16)
        dz, hout = torch.randn_like(z), torch.empty_like(h)
        dw1, dw2 = torch.empty_like(w1), torch.empty_like(w2)
        part = torch.empty(T, 2 * triton.cdiv(F, 64), device="cuda")
        print(f"\nE {E} T {T} H {H} F {F}")
        glu = {c.name: (lambda c=c: launch._gemm(EPI_GLU, x, w1, hout, counts, c, K=H, N=F,
                                                 b_strides=(w1.stride(0), w1.stride(2), w1.stride(1)),
                                                 ldc=hout.stride(0), F=F, probs=probs, z=z, act=0, interleave=32))
               for c in GLU}
        glu["torch._grouped_mm"] = lambda: torch._grouped_mm(x, w1.transpose(-2, -1), offs=offs)
        gp.table("fc1+GLU", glu, gp.gemm_flop(T, 2 * F, H))
        dglu = {c.name: (lambda c=c: launch._gemm(EPI_DGLU, dy, w2, dz, counts, c, K=H, N=F,
                                                  b_strides=(w2.stride(0), w2.stride(1), w2.stride(2)),
                                                  ldc=dz.stride(0), F=F, probs=probs, z=z, part=part, act=0,
                                                  interleave=32))
                for c in DGLU}
        dglu["torch._grouped_mm"] = lambda: torch._grouped_mm(dy, w2, offs=offs)
        gp.table("dgrad2+dGLU (the config as launched: BLOCK_N per half)", dglu, gp.gemm_flop(T, F, H))
        wg = {c.name: (lambda c=c: (launch._wgrad(dz, x, dw1, counts, T, c), launch._wgrad(dy, h, dw2, counts, T, c)))
              for c in WGRAD}
        wg["torch._grouped_mm"] = lambda: (torch._grouped_mm(dz.t(), x, offs=offs), torch._grouped_mm(dy.t(), h, offs=offs))
        gp.table("wgrads (dW1 + dW2)", wg, gp.gemm_flop(T, 2 * F, H) + gp.gemm_flop(T, H, F))
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
