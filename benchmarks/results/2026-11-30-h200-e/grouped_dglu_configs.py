"""H200: the fc2-dgrad + dGLU launch alone at several tilings, bf16 and fp8_block, and for
fp8_block with the epilogue's copy of dz against the launch without it plus the quantizer
kernel's copy. Balanced counts, interleave 32; do_bench medians.

    PYTHONPATH=src:benchmarks python3 benchmarks/results/2026-11-30-h200-e/grouped_dglu_configs.py [--shapes 1,2,3]

(Run 3's one-off, moved here from benchmarks/: run it from the root of a tree whose
benchmarks/ holds grouped_profile_fp8.py, e.g. 91e8131.)
"""
import argparse

import torch

from tilefuse.ops.grouped_glu_mlp import launch, recipes
from tilefuse.ops.grouped_glu_mlp.configs import GemmConfig
from tilefuse.ops.grouped_glu_mlp.kernels import EPI_DGLU
from tilefuse.utils import cdiv
from grouped_profile_fp8 import SHAPES, attempt, problem

CONFIGS = {None: [GemmConfig(128, 64, 64, 8, 4, 1), GemmConfig(128, 64, 64, 8, 3, 1), GemmConfig(64, 64, 64, 4, 4, 2),
                  GemmConfig(64, 64, 64, 4, 3, 2)],
           "fp8_block": [GemmConfig(128, 64, 128, 8, 3, 1), GemmConfig(128, 64, 128, 8, 4, 1),
                         GemmConfig(64, 64, 128, 4, 4, 2), GemmConfig(64, 64, 128, 4, 3, 2)]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="1,2,3")
    for s in ap.parse_args().shapes.split(","):
        E, T, H, F = SHAPES[int(s)]
        counts, x, probs, w1, w2, dy = problem(E, T, H, F)
        z = torch.randn(T, 2 * F, device="cuda", dtype=torch.bfloat16)
        dz = torch.empty_like(z)
        part = torch.empty(T, 2 * cdiv(F, 128), device="cuda")
        rows = recipes.QuantRows(torch.empty(T, 2 * F, dtype=torch.uint8, device="cuda"),
                                 torch.empty(2 * F // 128, T, device="cuda"), T, None)
        flop = 2 * T * F * H
        print(f"\nE {E} T {T} H {H} F {F}: fc2 dgrad + dGLU")
        for recipe in (None, "fp8_block"):
            a = dy if recipe is None else recipes.quantize_rows(recipe, dy)
            b = w2 if recipe is None else recipes.quantize_weight(recipe, w2, transpose=True)
            for cfg in CONFIGS[recipe]:
                def run(dz_rows=None, cfg=cfg, a=a, b=b, recipe=recipe):
                    launch._gemm(EPI_DGLU, a, b, dz, counts, cfg, K=H, N=F,
                                 b_strides=(w2.stride(0), w2.stride(1), w2.stride(2)), ldc=dz.stride(0), F=F,
                                 probs=probs, z=z, part=part, act=0, interleave=32, recipe=recipe, dz_rows=dz_rows)
                label = f"{recipe or 'bf16':9s} {cfg.name:24s}"
                attempt(label, run, flop)
                if recipe == "fp8_block":
                    attempt(f"{label} + dz copy in the epilogue", lambda run=run: run(rows), flop)
                    attempt(f"{label} + quantizer kernel copy", lambda run=run: (run(), recipes.quantize_rows(
                        "fp8_block", dz)), flop)
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
