"""Issue 16: "bring every fp8 role at least to its bf16 role's speed". Each fp8_block GEMM role
at the config the op runs (after run 4's table: the heuristic at shapes 1-2, 64x128 on 4 warps
through TMA at shape 3; the GLU and dGLU at glu_config / dglu_config of it; the wgrads at the
wgrad heuristic) against the torch._grouped_mm bf16 GEMM doing the same work (what the op as
called runs in bf16), interleaved per role, balanced and routed counts, the spec's three
shapes. The fp8 roles run on ready quantized operands: the quantizers are timed apart.

    PYTHONPATH=src python3 benchmarks/results/2026-12-02-h200-s/run8_fp8_roles_vs_bf16.py
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))   # benchmarks/: grouped_profile's helpers
from grouped_profile import SHAPES, fp8_roles, table  # noqa: E402

import torch  # noqa: E402

from tilefuse.check.grouped import gemm_roles  # noqa: E402
from tilefuse.ops.grouped_glu_mlp import recipes  # noqa: E402
from tilefuse.ops.grouped_glu_mlp.configs import GemmConfig, dglu_config, glu_config, heuristic  # noqa: E402
from tilefuse.ops.grouped_glu_mlp.reference import random_inputs  # noqa: E402

R = "fp8_block"
AS_RUN = {1: heuristic("fwd", 2, R), 2: heuristic("fwd", 2, R), 3: GemmConfig(64, 128, 128, 4, 3, 2, True)}
PAIRS = {"fc1+GLU": "fc1 + GLU", "fc2": "fc2", "dgrad2+dGLU": "fc2 dgrad + dGLU", "dgrad1": "fc1 dgrad",
         "wgrads (dW1 + dW2)": "wgrads (dW1 + dW2)"}


def routed(E, T, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.bincount(torch.multinomial(torch.rand(E, generator=g), T, replacement=True, generator=g),
                          minlength=E).tolist()


for s in (1, 2, 3):
    E, T, H, F = SHAPES[s]
    base = AS_RUN[s]
    cfg_of = {"fc1+GLU": glu_config(base, R), "dgrad2+dGLU": dglu_config(base, R),
              "wgrads (dW1 + dW2)": heuristic("wgrad", 2, R)}
    for label, counts in (("balanced", [T // E] * E), ("routed", routed(E, T))):
        i = random_inputs(counts, H, F, torch.bfloat16, bias=False, device="cuda")
        args = (i["counts"], i["x"], i["probs"], i["w1"], i["w2"], i["dy"])
        z = torch.randn(T, 2 * F, device="cuda", dtype=torch.bfloat16)
        h = torch.randn(T, F, device="cuda", dtype=torch.bfloat16)
        dz = torch.randn(T, 2 * F, device="cuda", dtype=torch.bfloat16)
        print(f"\n## shape {s} E {E} T {T} H {H} F {F}, {label} counts", flush=True)
        ours, theirs = fp8_roles(*args, z, h, dz), gemm_roles(*args)
        for name, (fn, flop) in ours.items():
            cfg = cfg_of.get(name, base)
            table(f"{name} (fp8 {cfg.name})", {"bf16 torch._grouped_mm": theirs[PAIRS[name]][1],
                                               "fp8_block": lambda fn=fn, cfg=cfg: fn(cfg)}, flop, 5)
        x, dy = i["x"], i["dy"]
        table("a step's quantizers", {
            "rows x, h, dy": lambda: [recipes.quantize_rows(R, t) for t in (x, h, dy)],
            "weight pairs W1, W2": lambda: [recipes.quantize_weight_pair(R, w) for w in (i["w1"], i["w2"])],
            "cols x, h, dy, dz": lambda: [recipes.quantize_cols(R, t) for t in (x, h, dy, dz)],
        }, None, 5)
        del i, args, z, h, dz, ours, theirs
        torch.cuda.empty_cache()
