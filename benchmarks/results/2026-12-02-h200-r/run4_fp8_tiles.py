"""fp8_block's store GEMMs (fc2, fc1 dgrad), its dGLU and its weight gradients at TMA launch
shapes not measured before: run 1 found the wgrad 1.05-1.32x faster with its tile transposed
(BLOCK_M 128, BLOCK_N 64 on 4 warps) than at the shape the profiles had tried. The same
question for the other roles, and a second step for the wgrad (256 x 64 on two warpgroups).
The spec's three shapes; interleaved, graph replay, 5 rounds.

    PYTHONPATH=src python3 benchmarks/results/2026-12-02-h200-r/run4_fp8_tiles.py
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))   # benchmarks/: grouped_profile's helpers
from grouped_profile import SHAPES, fp8_roles, problem, table  # noqa: E402

import torch  # noqa: E402

from tilefuse.ops.grouped_glu_mlp.configs import GemmConfig  # noqa: E402

GEMMS = [GemmConfig(128, 128, 128, 8, 3, 1), GemmConfig(64, 128, 128, 4, 3, 2, True),
         GemmConfig(128, 64, 128, 4, 3, 2, True), GemmConfig(128, 64, 128, 4, 4, 2, True),
         GemmConfig(64, 64, 128, 4, 4, 2, True)]
WGRADS = [GemmConfig(128, 64, 128, 4, 3, tma=True), GemmConfig(256, 64, 128, 8, 3, tma=True),
          GemmConfig(256, 64, 128, 8, 4, tma=True), GemmConfig(128, 64, 128, 8, 3, tma=True)]

for s in (1, 2, 3):
    E, T, H, F = SHAPES[s]
    counts, x, probs, w1, w2, dy = problem(E, T, H, F)
    z = torch.randn(T, 2 * F, device="cuda", dtype=torch.bfloat16)
    h = torch.randn(T, F, device="cuda", dtype=torch.bfloat16)
    dz = torch.randn(T, 2 * F, device="cuda", dtype=torch.bfloat16)
    print(f"\n## shape {s} E {E} T {T} H {H} F {F}")
    for name, (fn, flop) in fp8_roles(counts, x, probs, w1, w2, dy, z, h, dz).items():
        if name == "fc1+GLU":
            continue   # its float8 data through TMA spills (launch.tma_plan): pointers only
        tiles = WGRADS if name.startswith("wgrads") else [c for c in GEMMS
                                                          if not (name == "dgrad2+dGLU" and c.block_n > 64)]
        table(name, {c.name: (lambda c=c, fn=fn: fn(c)) for c in tiles}, flop, 5)
    del counts, x, probs, w1, w2, dy, z, h, dz
    torch.cuda.empty_cache()
