"""H200: where grouped_glu_mlp's fp8_block forward+backward time goes: each quantizer call and
each GEMM role under several tilings, the whole step, and the dense FP8 / bf16 matmul ceilings
measured in the same run (cuBLAS through torch._scaled_mm / matmul).

    PYTHONPATH=src python3 benchmarks/grouped_profile_fp8.py [--shapes 1,2] [--steps-only]

Needs a tree with ``recipes.quantize_weight_pair`` and ``launch.forward(keep_dgrad_weights=)``.
Balanced counts; do_bench medians.
"""
import argparse

import torch
import triton

from tilefuse.ops.grouped_glu_mlp import launch, recipes
from tilefuse.ops.grouped_glu_mlp.configs import GemmConfig
from tilefuse.ops.grouped_glu_mlp.kernels import EPI_DGLU, EPI_GLU, EPI_STORE
from tilefuse.ops.grouped_glu_mlp.reference import random_inputs

SHAPES = {1: (8, 16384, 4096, 3584), 2: (64, 32768, 2048, 1408), 3: (128, 65536, 2048, 768)}
GEMM_CONFIGS = [GemmConfig(128, 64, 128, 8, 3, 1), GemmConfig(128, 64, 128, 8, 4, 1),
                GemmConfig(128, 128, 128, 8, 3, 1), GemmConfig(64, 128, 128, 4, 3, 2), GemmConfig(64, 64, 128, 4, 4, 2),
                GemmConfig(128, 64, 128, 4, 3, 2)]
WGRAD_CONFIGS = [GemmConfig(64, 128, 128, 4, 3), GemmConfig(128, 128, 128, 8, 3), GemmConfig(128, 128, 128, 8, 4),
                 GemmConfig(64, 64, 128, 4, 3), GemmConfig(128, 64, 128, 4, 3), GemmConfig(128, 64, 128, 8, 3),
                 GemmConfig(256, 128, 128, 8, 3)]


def bench(fn, rep=50):
    return triton.testing.do_bench(fn, warmup=10, rep=rep)


def tflops(flop, ms):
    return flop / ms / 1e9


def attempt(label, fn, flop=None):
    try:
        ms = bench(fn)
    except Exception as exc:   # noqa: BLE001 (a tiling that does not fit is reported, not fatal)
        print(f"  {label}: {type(exc).__name__}: {str(exc).splitlines()[0][:90]}", flush=True)
        return None
    rate = f" {tflops(flop, ms):6.0f} TFLOP/s" if flop else ""
    print(f"  {label}: {ms:8.3f} ms{rate}", flush=True)
    return ms


def ceilings():
    a = torch.randn(16384, 4096, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(7168, 4096, device="cuda", dtype=torch.bfloat16)
    flop = 2 * 16384 * 4096 * 7168
    attempt("dense bf16 matmul 16384x4096x7168 (cuBLAS)", lambda: a @ b.t(), flop)
    a8, b8 = a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn)
    one = torch.ones((), device="cuda")
    attempt("dense fp8 _scaled_mm 16384x4096x7168 (cuBLAS, per-tensor scales)",
            lambda: torch._scaled_mm(a8, b8.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16), flop)


def problem(E, T, H, F, dev="cuda"):
    """(counts, x, probs, w1, w2, dy) of one shape: bf16, balanced counts (also used by
    grouped_profile.py)."""
    i = random_inputs([T // E] * E, H, F, torch.bfloat16, bias=False, device=dev)
    return i["counts"], i["x"], i["probs"], i["w1"], i["w2"], i["dy"]


def step(counts, x, probs, w1, w2, dy, recipe=None, wgrad_config=None):
    """One forward + backward (heuristic tiles) as the op runs it: the forward keeps fp8_block's
    dgrad weight copies for the backward."""
    _, z, h, kept = launch.forward(x, counts, probs, w1, w2, None, None, "swiglu", 32, recipe=recipe,
                                   keep_dgrad_weights=True)
    launch.backward(dy, x, counts, probs, w1, w2, None, None, z, h, "swiglu", 32, wgrad_config=wgrad_config,
                    recipe=recipe, dgrad_weights=kept)


def profile(E, T, H, F):
    dev = "cuda"
    inputs = problem(E, T, H, F, dev)
    counts, x, probs, w1, w2, dy = inputs
    z = torch.randn(T, 2 * F, device=dev, dtype=torch.bfloat16)
    h = torch.randn(T, F, device=dev, dtype=torch.bfloat16)
    dz = torch.randn(T, 2 * F, device=dev, dtype=torch.bfloat16)
    y, dx = torch.empty_like(x), torch.empty_like(x)
    hout, dzout = torch.empty_like(h), torch.empty_like(dz)
    dw1, dw2 = torch.empty_like(w1), torch.empty_like(w2)
    part = torch.empty(T, F // 16 + 1, device=dev)
    r = "fp8_block"
    print(f"\nE {E} T {T} H {H} F {F} (fp8_block, balanced counts)")
    print(" quantizers:")
    quant = {
        "rows x": lambda: recipes.quantize_rows(r, x), "rows h": lambda: recipes.quantize_rows(r, h),
        "rows dy": lambda: recipes.quantize_rows(r, dy), "rows dz": lambda: recipes.quantize_rows(r, dz),
        "W1": lambda: recipes.quantize_weight(r, w1), "W2": lambda: recipes.quantize_weight(r, w2),
        "W1 dgrad": lambda: recipes.quantize_weight(r, w1, transpose=True),
        "W2 dgrad": lambda: recipes.quantize_weight(r, w2, transpose=True),
        "W1 pair": lambda: recipes.quantize_weight_pair(r, w1),
        "W2 pair": lambda: recipes.quantize_weight_pair(r, w2),
        "cols x": lambda: recipes.quantize_cols(r, x), "cols h": lambda: recipes.quantize_cols(r, h),
        "cols dy": lambda: recipes.quantize_cols(r, dy), "cols dz": lambda: recipes.quantize_cols(r, dz),
    }
    times_q = {name: attempt(f"{name:9s}", fn) for name, fn in quant.items()}
    used = [n for n in times_q if n not in ("W1", "W2", "W1 dgrad", "W2 dgrad")]   # what a step runs
    print(f"  a step's quantizers (weight pairs): {sum(times_q[n] or 0 for n in used):.3f} ms")
    xq, hq, dyq, dzq = (recipes.quantize_rows(r, t) for t in (x, h, dy, dz))
    w1q, w2q = recipes.quantize_weight(r, w1), recipes.quantize_weight(r, w2)
    w1t, w2t = recipes.quantize_weight(r, w1, transpose=True), recipes.quantize_weight(r, w2, transpose=True)
    cols = {name: recipes.quantize_cols(r, t) for name, t in (("x", x), ("h", h), ("dy", dy), ("dz", dz))}
    gf = lambda m, n, k: 2 * m * n * k   # noqa: E731
    roles = {
        "fc1+GLU": (lambda c: launch._gemm(EPI_GLU, xq, w1q, hout, counts, c, K=H, N=F, b_strides=None,
                                           ldc=hout.stride(0), F=F, probs=probs, z=z, act=0, interleave=32,
                                           recipe=r), gf(T, 2 * F, H)),
        "fc2": (lambda c: launch._gemm(EPI_STORE, hq, w2q, y, counts, c, K=F, N=H, b_strides=None, ldc=y.stride(0),
                                       probs=probs, recipe=r), gf(T, H, F)),
        "dgrad2+dGLU": (lambda c: launch._gemm(EPI_DGLU, dyq, w2t, dzout, counts, c, K=H, N=F, b_strides=None,
                                               ldc=dzout.stride(0), F=F, probs=probs, z=z, part=part, act=0,
                                               interleave=32, recipe=r), gf(T, F, H)),
        "dgrad1": (lambda c: launch._gemm(EPI_STORE, dzq, w1t, dx, counts, c, K=2 * F, N=H, b_strides=None,
                                          ldc=dx.stride(0), recipe=r), gf(T, H, 2 * F)),
    }
    for name, (fn, flop) in roles.items():
        print(f" {name}:")
        for c in GEMM_CONFIGS:
            if name == "dgrad2+dGLU" and c.block_n > 64:
                continue
            attempt(f"{c.name:24s}", lambda: fn(c), flop)
    print(" wgrads (dW1 + dW2):")
    flop_w = gf(T, 2 * F, H) + gf(T, H, F)
    for c in WGRAD_CONFIGS:
        attempt(f"{c.name:24s}", lambda: (launch._wgrad(cols["dz"], cols["x"], dw1, counts, T, c, r),
                                          launch._wgrad(cols["dy"], cols["h"], dw2, counts, T, c, r)), flop_w)
    print(" whole step (launch.forward + backward, 3x forward FLOPs):")
    flop_step = 3 * (gf(T, 2 * F, H) + gf(T, H, F))
    for wc in (None, WGRAD_CONFIGS[1], WGRAD_CONFIGS[2]):
        attempt(f"fp8_block heuristic / wgrad {wc.name if wc else 'heuristic'}",
                lambda wc=wc: step(*inputs, recipe=r, wgrad_config=wc), flop_step)
    attempt("bf16 heuristic", lambda: step(*inputs), flop_step)
    torch.cuda.empty_cache()


def steps(E, T, H, F, rounds=3, providers=(None, "fp8_block", "mxfp8", "nvfp4")):
    """The whole forward + backward (launch.forward + backward, heuristic tiles) of bf16 and of
    every recipe, the providers alternating for ``rounds`` rounds; the median per provider."""
    inputs = problem(E, T, H, F)
    flop = 3 * 2 * T * 3 * H * F
    times = {p: [] for p in providers}
    for _ in range(rounds):
        for p in providers:
            times[p].append(bench(lambda p=p: step(*inputs, recipe=p)))
    print(f"\nE {E} T {T} H {H} F {F}: whole step, heuristic tiles, median of {rounds} alternating rounds")
    base = sorted(times[None])[rounds // 2]
    for p in providers:
        ms = sorted(times[p])[rounds // 2]
        print(f"  {p or 'bf16':10s} {ms:8.3f} ms {tflops(flop, ms):6.0f} TFLOP/s  {base / ms:5.2f}x bf16", flush=True)
    torch.cuda.empty_cache()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="1,2")
    ap.add_argument("--steps-only", action="store_true", help="only the whole steps of bf16 and every recipe")
    ap.add_argument("--providers", default="bf16,fp8_block,mxfp8,nvfp4", help="--steps-only: which to time")
    args = ap.parse_args()
    print(f"torch {torch.__version__}, triton {triton.__version__}, {torch.cuda.get_device_name()}")
    ceilings()
    providers = tuple(None if p == "bf16" else p for p in args.providers.split(","))
    for s in args.shapes.split(","):
        if args.steps_only:
            steps(*SHAPES[int(s)], providers=providers)
        else:
            profile(*SHAPES[int(s)])


if __name__ == "__main__":
    main()
