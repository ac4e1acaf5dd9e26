"""fp8_block's whole step (launch.forward + backward, quantizers inside) with the wgrad at its
new heuristic tile (configs.heuristic: 128x64, BLOCK_M 128 of the weight's columns) against the
old one (64x128), beside the bf16 compose route (what the op runs as called), interleaved,
CUDA-graph replay, the spec's three shapes.

    PYTHONPATH=src python3 benchmarks/results/2026-12-02-h200-r/run3_fp8_step_ab.py
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))   # benchmarks/: grouped_profile's helpers
from grouped_profile import SHAPES, compose_step, gemm_flop, problem, step, table  # noqa: E402

import torch  # noqa: E402

from tilefuse.ops.grouped_glu_mlp.configs import GemmConfig, heuristic  # noqa: E402

OLD = GemmConfig(block_m=64, block_n=128, block_k=128, num_warps=4, num_stages=3, tma=True)

for s in (1, 2, 3):
    E, T, H, F = SHAPES[s]
    inputs = problem(E, T, H, F)
    new = heuristic("wgrad", 2, "fp8_block")
    print(f"\n## shape {s} E {E} T {T} H {H} F {F}")
    table("whole step (3x forward FLOPs)", {
        f"fp8_block, wgrad {OLD.name} (old)": lambda: step(*inputs, recipe="fp8_block", wgrad_config=OLD),
        f"fp8_block, wgrad {new.name} (heuristic)": lambda: step(*inputs, recipe="fp8_block"),
        "bf16 compose route (the op as called)": lambda: compose_step(*inputs),
    }, 3 * (gemm_flop(T, 2 * F, H) + gemm_flop(T, H, F)), 7)
    del inputs
    torch.cuda.empty_cache()
