"""fp8_block's GEMM roles under a register cap: the wgrad ran 1.16-2.01x faster capped at 168
registers (three 4-warp programs an SM instead of two; 2026-12-02-h200-r run 7). The four
other roles compile to 255 registers too, with 64-88 byte stacks for the GLU and dGLU, and are
the largest share of the fp8 step (4.1 of ~7.1 ms at shape 1). Does a cap, with the persistent
grid's programs per SM raised to what the registers then allow, run them faster?

Each role at the config the op runs as called at that shape (shape 1: the heuristic 128x128
on 8 warps, shapes 2-3: the table's 64x128 on 4 warps through TMA; the GLU and dGLU at
glu_config / dglu_config of it), and the same with a cap: 4 warps at 168 (3 programs an SM)
and 128 (4), 8 warps at 128 (2). The cap is injected into every grouped_gemm_kernel launch
(the op passes it to descriptor launches only: configs.GemmConfig.maxnreg). Balanced and
routed counts; interleaved, graph replay, 5 rounds.

    PYTHONPATH=src python3 benchmarks/results/2026-12-02-h200-s/run3_fp8_role_caps.py
"""
import dataclasses
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))   # benchmarks/: grouped_profile's helpers
from grouped_profile import SHAPES, fp8_roles, table  # noqa: E402

import torch  # noqa: E402

from tilefuse.ops.grouped_glu_mlp import kernels  # noqa: E402
from tilefuse.ops.grouped_glu_mlp.configs import GemmConfig, dglu_config, glu_config, heuristic  # noqa: E402
from tilefuse.ops.grouped_glu_mlp.reference import random_inputs  # noqa: E402

R = "fp8_block"
TABLE = GemmConfig(64, 128, 128, 4, 3, 2, True)   # the built-in entries at shapes 2-3
SHIPPED = kernels.grouped_gemm_kernel


class Capped:
    """grouped_gemm_kernel with maxnreg=cap on every launch (None: as shipped)."""

    def __init__(self, cap):
        self.cap = cap

    def __getitem__(self, grid):
        launch = SHIPPED[grid]
        return lambda *a, **kw: launch(*a, **dict(kw, maxnreg=self.cap))


def variants(cfg):
    """(label, config, cap): as run, then capped with the programs per SM the registers allow."""
    out = [(f"{cfg.name}", cfg, None)]
    caps = (168, 128) if cfg.num_warps == 4 else (128,)
    for cap in caps:
        p = max(cfg.programs_per_sm, 65536 // (cfg.num_warps * 32 * cap))
        c = dataclasses.replace(cfg, programs_per_sm=p)
        out.append((f"{c.name} capped {cap}", c, cap))
    return out


def routed(E, T, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.bincount(torch.multinomial(torch.rand(E, generator=g), T, replacement=True, generator=g),
                          minlength=E).tolist()


def run(fn, cfg, cap):
    kernels.grouped_gemm_kernel = Capped(cap)
    try:
        fn(cfg)
    finally:
        kernels.grouped_gemm_kernel = SHIPPED


for s in (1, 2, 3):
    E, T, H, F = SHAPES[s]
    base = heuristic("fwd", 2, R) if s == 1 else TABLE
    for label, counts in (("balanced", [T // E] * E), ("routed", routed(E, T))):
        i = random_inputs(counts, H, F, torch.bfloat16, bias=False, device="cuda")
        z = torch.randn(T, 2 * F, device="cuda", dtype=torch.bfloat16)
        h = torch.randn(T, F, device="cuda", dtype=torch.bfloat16)
        dz = torch.randn(T, 2 * F, device="cuda", dtype=torch.bfloat16)
        print(f"\n## shape {s} E {E} T {T} H {H} F {F}, {label} counts")
        roles = fp8_roles(i["counts"], i["x"], i["probs"], i["w1"], i["w2"], i["dy"], z, h, dz)
        for name, (fn, flop) in roles.items():
            if name.startswith("wgrads"):
                continue
            cfg = glu_config(base, R) if name == "fc1+GLU" else dglu_config(base, R) if name == "dgrad2+dGLU" else base
            table(name, {lab: (lambda fn=fn, c=c, cap=cap: run(fn, c, cap)) for lab, c, cap in variants(cfg)},
                  flop, 5)
        del i, z, h, dz, roles
        torch.cuda.empty_cache()
