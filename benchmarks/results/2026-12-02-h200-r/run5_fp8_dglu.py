"""fp8_block's fc2-dgrad + dGLU launch at 64x64 on 4 warps, 3 or 4 stages, its float8 data
through pointers or TMA (run 4 had 64x64, 4 stages, through TMA 1.24-1.27x faster than an
earlier run's pointer tile), then the whole step (heuristic tiles) with the dGLU as
configs.dglu_config gives it against the same with 64x64 w4 s4 through TMA. The spec's three
shapes; interleaved, graph replay.

    PYTHONPATH=src python3 benchmarks/results/2026-12-02-h200-r/run5_fp8_dglu.py
"""
import dataclasses
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))   # benchmarks/: grouped_profile's helpers
from grouped_profile import SHAPES, fp8_roles, gemm_flop, problem, step, table  # noqa: E402

import torch  # noqa: E402

from tilefuse.ops.grouped_glu_mlp import configs, launch  # noqa: E402
from tilefuse.ops.grouped_glu_mlp.configs import GemmConfig  # noqa: E402

DGLU = [GemmConfig(64, 64, 128, 4, s, 2, tma) for tma in (False, True) for s in (3, 4)]
TRIAL = GemmConfig(64, 64, 128, 4, 4, 2, True)
shipped = configs.dglu_config


def trial_dglu(cfg, recipe=None):
    return TRIAL if recipe == "fp8_block" else shipped(cfg, recipe)


for s in (1, 2, 3):
    E, T, H, F = SHAPES[s]
    inputs = problem(E, T, H, F)
    z = torch.randn(T, 2 * F, device="cuda", dtype=torch.bfloat16)
    h = torch.randn(T, F, device="cuda", dtype=torch.bfloat16)
    dz = torch.randn(T, 2 * F, device="cuda", dtype=torch.bfloat16)
    print(f"\n## shape {s} E {E} T {T} H {H} F {F}; the step's dGLU now: "
          f"{shipped(configs.heuristic('bwd', 2, 'fp8_block'), 'fp8_block').name}")
    fn, flop = fp8_roles(*inputs, z, h, dz)["dgrad2+dGLU"]
    table("dgrad2+dGLU", {c.name: (lambda c=c: fn(c)) for c in DGLU}, flop, 5)

    def with_dglu(rule):
        def run():
            launch.dglu_config = rule
            try:
                step(*inputs, recipe="fp8_block")
            finally:
                launch.dglu_config = shipped
        return run
    table("whole step (3x forward FLOPs)", {"dGLU as shipped": with_dglu(shipped),
                                             f"dGLU {TRIAL.name}": with_dglu(trial_dglu)},
          3 * (gemm_flop(T, 2 * F, H) + gemm_flop(T, H, F)), 7)
    del inputs, z, h, dz
    torch.cuda.empty_cache()
