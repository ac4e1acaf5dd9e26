"""fp8_block's whole step (heuristic tiles) with the dGLU as shipped (64x64 w4 s3, 4 programs an
SM, pointers) against configs.dglu_config's tile read through TMA (the same with TMA: what
the heuristic step would run if the fp8 dGLU always took descriptors) and run 5's trial
(64x64 w4 s4, 2 programs an SM, TMA). The spec's three shapes; interleaved, graph replay.

    PYTHONPATH=src python3 benchmarks/results/2026-12-02-h200-r/run6_fp8_dglu_step.py
"""
import dataclasses
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))   # benchmarks/: grouped_profile's helpers
from grouped_profile import SHAPES, gemm_flop, problem, step, table  # noqa: E402

import torch  # noqa: E402

from tilefuse.ops.grouped_glu_mlp import configs, launch  # noqa: E402
from tilefuse.ops.grouped_glu_mlp.configs import GemmConfig  # noqa: E402

shipped = configs.dglu_config
RULES = {
    "dGLU as shipped": shipped,
    "dGLU as shipped, through TMA": lambda cfg, recipe=None: (dataclasses.replace(shipped(cfg, recipe), tma=True)
                                                              if recipe == "fp8_block" else shipped(cfg, recipe)),
    "dGLU M64-N64-K128-w4-s4-p2-tma (run 5)": lambda cfg, recipe=None: (GemmConfig(64, 64, 128, 4, 4, 2, True)
                                                                        if recipe == "fp8_block"
                                                                        else shipped(cfg, recipe)),
}

for s in (1, 2, 3):
    E, T, H, F = SHAPES[s]
    inputs = problem(E, T, H, F)
    print(f"\n## shape {s} E {E} T {T} H {H} F {F}")

    def with_dglu(rule):
        def run():
            launch.dglu_config = rule
            try:
                step(*inputs, recipe="fp8_block")
            finally:
                launch.dglu_config = shipped
        return run
    table("whole step (3x forward FLOPs)", {name: with_dglu(rule) for name, rule in RULES.items()},
          3 * (gemm_flop(T, 2 * F, H) + gemm_flop(T, H, F)), 9)
    del inputs
    torch.cuda.empty_cache()
