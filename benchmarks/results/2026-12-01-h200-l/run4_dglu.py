"""Run 4: the fc2 dgrad + dGLU launch after the epilogue's z reads moved to a descriptor
(kernels.load_z_pair), at the spec's three shapes against torch._grouped_mm and against a
plain store GEMM of the same size (EPI_STORE, 128x128 through TMA), bf16, balanced counts;
then the whole step of the heuristic TMA tiles against the compose route.

    PYTHONPATH=src python3 benchmarks/results/2026-12-01-h200-l/run4_dglu.py
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import grouped_profile as gp  # noqa: E402
import torch  # noqa: E402
import triton  # noqa: E402

from tilefuse.ops.grouped_glu_mlp import launch  # noqa: E402
from tilefuse.ops.grouped_glu_mlp.configs import GemmConfig  # noqa: E402
from tilefuse.ops.grouped_glu_mlp.kernels import EPI_DGLU, EPI_STORE  # noqa: E402

DGLU = [GemmConfig(128, 64, 64, 8, 4, 1, True), GemmConfig(128, 64, 64, 8, 3, 1, True), GemmConfig(128, 64, 64, 8, 4, 1)]
MAIN = GemmConfig(128, 128, 64, 8, 4, 1, True)
WGRAD = GemmConfig(128, 128, 64, 8, 3, 1, True)


def main():
    print(f"torch {torch.__version__}, triton {triton.__version__}, {torch.cuda.get_device_name()}")
    for E, T, H, F in (gp.SHAPES[1], gp.SHAPES[2], gp.SHAPES[3]):
        counts, x, probs, w1, w2, dy = gp.problem(E, T, H, F)
        offs = counts.cumsum(0).to(torch.int32)
        z = torch.randn(T, 2 * F, device="cuda", dtype=torch.bfloat16)
        dz, dh = torch.randn_like(z), torch.empty(T, F, device="cuda", dtype=torch.bfloat16)
        part = torch.empty(T, 2 * triton.cdiv(F, 64), device="cuda")
        print(f"\nE {E} T {T} H {H} F {F}")
        prov = {c.name: (lambda c=c: launch._gemm(EPI_DGLU, dy, w2, dz, counts, c, K=H, N=F,
                                                  b_strides=(w2.stride(0), w2.stride(1), w2.stride(2)),
                                                  ldc=dz.stride(0), F=F, probs=probs, z=z, part=part, act=0,
                                                  interleave=32))
                for c in DGLU}
        prov["store GEMM of that size " + MAIN.name] = lambda: launch._gemm(
            EPI_STORE, dy, w2, dh, counts, MAIN, K=H, N=F, b_strides=(w2.stride(0), w2.stride(1), w2.stride(2)),
            ldc=dh.stride(0))
        prov["torch._grouped_mm"] = lambda: torch._grouped_mm(dy, w2, offs=offs)
        gp.table("dgrad2+dGLU (BLOCK_N per half)", prov, gp.gemm_flop(T, F, H))
        inputs = (counts, x, probs, w1, w2, dy)
        gp.table("whole step (3x forward FLOPs)",
                 {"compose route": lambda: gp.compose_step(*inputs),
                  f"fused {MAIN.name} / wgrad {WGRAD.name}": lambda: gp.step(*inputs, config=MAIN, wgrad_config=WGRAD)},
                 3 * (gp.gemm_flop(T, 2 * F, H) + gp.gemm_flop(T, H, F)))
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
