"""fp8_block's whole step after the wgrad change (configs.heuristic: a 168-register cap, the
shared 128-token blocks through the descriptors, the expert offsets summed as vectors;
results/2026-12-02-h200-r run 7 timed the launch alone), beside the same step with the
wgrad uncapped, and the op as users call it (the public API at level 2, autograd, recipe
fp8_block and bf16). The spec's three shapes, balanced counts (whole 128-token blocks an
expert) and routed counts (a multinomial draw over the experts, as the tuner's inputs: every
expert shares blocks with its neighbours); interleaved, CUDA-graph replay.

    PYTHONPATH=src python3 benchmarks/results/2026-12-02-h200-s/run2_fp8_step.py [--tiny]
"""
import dataclasses
import os
import sys
from pathlib import Path

TINY = "--tiny" in sys.argv
import torch  # noqa: E402

if TINY and not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))   # benchmarks/: grouped_profile's helpers
from grouped_profile import SHAPES, TINY_SHAPE, gemm_flop, step, table  # noqa: E402

from tilefuse import policy  # noqa: E402
from tilefuse.ops.grouped_glu_mlp.api import grouped_glu_mlp  # noqa: E402
from tilefuse.ops.grouped_glu_mlp.configs import heuristic  # noqa: E402
from tilefuse.ops.grouped_glu_mlp.reference import random_inputs  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def routed(E, T, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.bincount(torch.multinomial(torch.rand(E, generator=g), T, replacement=True, generator=g),
                          minlength=E).tolist()


def as_called(i, leaves, recipe):
    def run():
        with policy.level(2):
            y = grouped_glu_mlp(i["x"], i["counts"], i["probs"], i["w1"], i["w2"], glu_interleave=32,
                                recipe=recipe)
            return torch.autograd.grad(y, leaves, i["dy"])
    return run


uncapped = dataclasses.replace(heuristic("wgrad", 2, "fp8_block"), maxnreg=None)
shapes = {0: TINY_SHAPE} if TINY else SHAPES
for s, (E, T, H, F) in shapes.items():
    for label, counts in (("balanced", [T // E] * E), ("routed", routed(E, T))):
        i = random_inputs(counts, H, F, torch.bfloat16, bias=False, device=DEVICE)
        leaves = [i[k].requires_grad_(True) for k in ("x", "probs", "w1", "w2")]
        args = [i[k].detach() for k in ("counts", "x", "probs", "w1", "w2", "dy")]
        print(f"\n## shape {s} E {E} T {T} H {H} F {F}, {label} counts (min {min(counts)}, max {max(counts)})")
        table("whole step (3x forward FLOPs)", {
            "fp8_block step (heuristic: wgrad capped at 168)": lambda: step(*args, recipe="fp8_block"),
            "fp8_block step, wgrad uncapped": lambda: step(*args, recipe="fp8_block", wgrad_config=uncapped),
            "fp8_block as called (API, level 2)": as_called(i, leaves, "fp8_block"),
            "bf16 as called (API, level 2)": as_called(i, leaves, None),
        }, 3 * (gemm_flop(T, 2 * F, H) + gemm_flop(T, H, F)), 2 if TINY else 7)
        del i, leaves, args
        if DEVICE == "cuda":
            torch.cuda.empty_cache()
