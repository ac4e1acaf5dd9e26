"""fp8_block's weight gradients (dW1 + dW2) at launch shapes the sweeps did not try, beside the
bf16 CUTLASS wgrads (torch._grouped_mm) of the same work, the spec's three shapes.

The fp8 wgrad waits for each 128-token chunk's dot before it rescales it into the accumulator
(kernels.grouped_wgrad_kernel), so a program's tensor cores idle while it scales; more programs
resident on an SM (fewer pipeline stages: less shared memory a program) can fill that. The
earlier profiles tried 3 and 4 stages only (2026-12-02-h200-o run 2).

    PYTHONPATH=src python3 benchmarks/results/2026-12-02-h200-r/run1_fp8_wgrad.py [--shapes 1,2,3]
"""
import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))   # benchmarks/: grouped_profile's helpers
from grouped_profile import SHAPES, gemm_flop, problem, table  # noqa: E402

from tilefuse.ops.grouped_glu_mlp import launch, recipes  # noqa: E402
from tilefuse.ops.grouped_glu_mlp.configs import GemmConfig, heuristic  # noqa: E402

TMA_TILES = [(64, 128, 4), (64, 64, 4), (128, 64, 4), (128, 128, 8), (64, 256, 8)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="1,2,3")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    r = "fp8_block"
    for s in (int(v) for v in args.shapes.split(",")):
        E, T, H, F = SHAPES[s]
        counts, x, probs, w1, w2, dy = problem(E, T, H, F)
        h = torch.randn(T, F, device="cuda", dtype=torch.bfloat16)
        dz = torch.randn(T, 2 * F, device="cuda", dtype=torch.bfloat16)
        dw1, dw2 = torch.empty_like(w1), torch.empty_like(w2)
        cols = {n: recipes.quantize_cols(r, t) for n, t in (("x", x), ("h", h), ("dy", dy), ("dz", dz))}
        offs = counts.cumsum(0).to(torch.int32)
        print(f"\n## shape {s} E {E} T {T} H {H} F {F}")
        providers = {"bf16 torch._grouped_mm": lambda: (torch._grouped_mm(dz.t(), x, offs=offs),
                                                       torch._grouped_mm(dy.t(), h, offs=offs))}
        cfgs = [heuristic("wgrad", 2, r)]
        for bm, bn, w in TMA_TILES:
            for stages in (2, 3, 4):
                c = GemmConfig(block_m=bm, block_n=bn, block_k=128, num_warps=w, num_stages=stages, tma=True)
                if c not in cfgs:
                    cfgs.append(c)
        for c in cfgs:
            providers[f"fp8 {c.name}"] = (lambda c=c: (launch._wgrad(cols["dz"], cols["x"], dw1, counts, T, c, r),
                                                       launch._wgrad(cols["dy"], cols["h"], dw2, counts, T, c, r)))
        table("wgrads (dW1 + dW2)", providers, gemm_flop(T, 2 * F, H) + gemm_flop(T, H, F), args.rounds)
        del cols, x, h, dz, dy, w1, w2, dw1, dw2
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
