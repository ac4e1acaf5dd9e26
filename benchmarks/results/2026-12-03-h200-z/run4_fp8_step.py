"""fp8_block's whole step (launch.forward + backward, quantizers inside) with fc2 and the fc1
dgrad through the warp-specialised Gluon kernel (GemmConfig.ws on the heuristic) against the
shipped configs (the heuristic; 64x128 on 4 warps through TMA, shape 3's table entry), beside
the bf16 compose route (what the op runs as called), interleaved, CUDA-graph replay, the spec's
three shapes. Every fp8 variant's outputs are checked bitwise against the heuristic's first.

    PYTHONPATH=src python3 benchmarks/results/2026-12-03-h200-z/run4_fp8_step.py
"""
import dataclasses
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))   # benchmarks/: grouped_profile's helpers
from grouped_profile import SHAPES, compose_step, gemm_flop, problem, table  # noqa: E402

import torch  # noqa: E402

from tilefuse.ops.grouped_glu_mlp import launch  # noqa: E402
from tilefuse.ops.grouped_glu_mlp.configs import GemmConfig, heuristic  # noqa: E402

HEUR = heuristic("fwd", 2, "fp8_block")
CONFIGS = {"heuristic": HEUR, "64x128 w4 s3 tma": GemmConfig(64, 128, 128, 4, 3, 2, True),
           "heuristic + ws": dataclasses.replace(HEUR, ws=True),
           "heuristic + ws s4": dataclasses.replace(HEUR, ws=True, num_stages=4)}


def outputs(counts, x, probs, w1, w2, dy, cfg):
    y, z, h, kept = launch.forward(x, counts, probs, w1, w2, None, None, "swiglu", 32, config=cfg,
                                   recipe="fp8_block", keep_dgrad_weights=True)
    grads = launch.backward(dy, x, counts, probs, w1, w2, None, None, z, h, "swiglu", 32, config=cfg,
                            recipe="fp8_block", dgrad_weights=kept)
    return (y, *grads[:4])


def roles(E, T, H, F):
    """fc2 and the fc1 dgrad alone: the Triton kernel at the heuristic and at 64x128 through TMA,
    the product's ws kernel (its next tile's cursor found under the first chunk's wgmma), and
    run 3's probe (the cursor at each tile's start)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import run3_fp8_ws as R3
    from tilefuse.ops.grouped_glu_mlp import recipes, ws_kernels
    from tilefuse.ops.grouped_glu_mlp.kernels import EPI_STORE
    g = torch.Generator(device="cuda").manual_seed(E)
    counts = torch.full((E,), T // E, device="cuda", dtype=torch.int32)
    for role, K in (("fc2", F), ("fc1 dgrad", 2 * F)):
        a = torch.randn(T, K, generator=g, device="cuda").bfloat16()
        w = torch.randn(E, H, K, generator=g, device="cuda").bfloat16() * 0.05
        qa, qw = recipes.quantize_rows("fp8_block", a), recipes.quantize_weight("fp8_block", w)
        c = torch.empty(T, H, device="cuda", dtype=torch.bfloat16)
        providers = {f"triton {n}": (lambda cfg=cfg: launch._gemm(EPI_STORE, qa, qw, c, counts, cfg, K=K, N=H,
                                                                   b_strides=(0, 0, 0), ldc=H, recipe="fp8_block"))
                     for n, cfg in list(CONFIGS.items())[:2]}
        providers["ws (product) s3"] = lambda: ws_kernels.launch(qa, qw, c, counts, N=H, stages=3)
        providers["ws (run 3 probe) s3"] = lambda: R3.launch_ws(qa, qw, c, counts, K=K, N=H, stages=3)
        table(f"{role} (M {T}, N {H}, K {K})", providers, 2 * T * H * K, 7)
        del a, w, qa, qw, c


ok = True
for s in (1, 2, 3):
    E, T, H, F = SHAPES[s]
    inputs = problem(E, T, H, F)
    print(f"\n## shape {s} E {E} T {T} H {H} F {F}", flush=True)
    want = outputs(*inputs, HEUR)
    for name, cfg in CONFIGS.items():
        got = outputs(*inputs, cfg)
        same = all(torch.equal(a, b) for a, b in zip(want, got))
        ok &= same
        print(f"  {name}: y, dx, dprobs, dw1, dw2 bitwise the heuristic's: {same}", flush=True)
    del want, got
    providers = {f"fp8_block {n}": (lambda c=c: outputs(*inputs, c)) for n, c in CONFIGS.items()}
    providers["bf16 compose route (the op as called)"] = lambda: compose_step(*inputs)
    table("whole step (3x forward FLOPs)", providers, 3 * (gemm_flop(T, 2 * F, H) + gemm_flop(T, H, F)), 7)
    del inputs
    torch.cuda.empty_cache()
    roles(E, T, H, F)
    torch.cuda.empty_cache()
print(f"bitwise: {ok}")
sys.exit(0 if ok else 1)
