"""Where does grouped_glu_mlp's forward + backward time go, GEMM role by role, and which tiling is fastest for each?

Per shape, each kernel launch of a step alone, timed with the one harness
(``tilefuse.tuning.timing.interleaved``: warm-up, CUDA-graph replay, the providers of one
table interleaved in rotating rounds, medians), balanced expert counts, bf16 inputs:

- ``bf16`` (``--recipes``): each GEMM role (fc1 + GLU, fc2, fc2 dgrad + dGLU at
  ``dglu_config``'s tile, fc1 dgrad) at the heuristic 128x128x64 tile through pointers and at
  several tiles through TMA (``GemmConfig.tma``), against ``torch._grouped_mm`` doing the same
  GEMM; the two weight gradients likewise against ``_grouped_mm``'s (each tile's products
  checked against ``_grouped_mm``'s first, in poisoned memory, and a tile that differs left
  out: ``check.grouped.role_mismatch``; not the GLU and dGLU epilogues, which the test suite
  checks); and the whole step with
  a few (GEMM tile, wgrad tile) pairs against the compose route;
- ``fp8_block``: every quantizer call of a step (the row copies, the weights alone, as dgrad
  copies and as pairs, the column copies grouped by expert, the row + column pairs) and their
  sum for what a step runs; each GEMM role
  and the weight gradients at several tilings; the whole step (``launch.forward`` +
  ``backward``, heuristic tiles, quantization inside) with the heuristic wgrad and two others,
  beside the bf16 step;
- the dense cuBLAS ceilings measured in the same run (bf16 matmul, fp8 ``_scaled_mm`` with
  per-tensor scales, 16384 x 4096 x 7168).

The whole op against its peers (the unfused composition, torch.compile, the per-expert loop,
every recipe's step against bf16) is ``tilefuse bench --ops grouped_glu_mlp``; this program is
the per-role breakdown behind it.

    PYTHONPATH=src python3 benchmarks/grouped_profile.py [--recipes bf16,fp8_block] [--shapes 1,2,3] [--rounds 5]
    PYTHONPATH=src python3 benchmarks/grouped_profile.py --tiny     # CPU smoke test (interpreter, ~1 min)

Shapes (E, T, H, F): 1 = (8, 16384, 4096, 3584), 2 = (64, 32768, 2048, 1408),
3 = (128, 65536, 2048, 768) (the spec's, ``ops.grouped_glu_mlp.tune.DEFAULT_SHAPES``).
Prints, per shape and recipe, one line per launch and tiling: ms and TFLOP/s (2 M N K per
GEMM; the step counts 3x the forward FLOPs); a tiling that does not fit prints its error.
Time on the H200: about 1 minute per shape for bf16 and 1.5 minutes for fp8_block (Triton
compiles each tiling once; ~6 minutes for both recipes at all three shapes).
"""

from __future__ import annotations

import argparse
import os
import sys

import torch

TINY = "--tiny" in sys.argv
if TINY and not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")   # before tilefuse imports triton.language

import triton  # noqa: E402

from tilefuse.check.bench import error_text  # noqa: E402
from tilefuse.check.grouped import GLUON_ROWS, GLUON_WGRADS, gemm_roles, role_mismatch  # noqa: E402
from tilefuse.ops.grouped_glu_mlp import compose, launch, recipes  # noqa: E402
from tilefuse.ops.grouped_glu_mlp.configs import GemmConfig  # noqa: E402
from tilefuse.ops.grouped_glu_mlp.kernels import EPI_DGLU, EPI_GLU, EPI_STORE  # noqa: E402
from tilefuse.ops.grouped_glu_mlp.reference import random_inputs  # noqa: E402
from tilefuse.ops.grouped_glu_mlp.tune import COMPOSE_CANDIDATES, DEFAULT_SHAPES  # noqa: E402
from tilefuse.tuning import timing  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
SHAPES = dict(enumerate(DEFAULT_SHAPES, start=1))
TINY_SHAPE = (2, 256, 256, 128)   # H and F multiples of fp8_block's 128

BF16_MAIN = GemmConfig(128, 128, 64, 8, 4, 1)
# Each GEMM role at the heuristic tile through pointers, then through TMA at several tiles
# (GemmConfig.tma; the dGLU caps BLOCK_N at 64, configs.dglu_config).
BF16_GEMMS = [BF16_MAIN, GemmConfig(128, 128, 64, 8, 4, 1, True), GemmConfig(128, 128, 64, 8, 3, 1, True),
              GemmConfig(128, 256, 64, 8, 3, 1, True), GemmConfig(256, 128, 64, 8, 3, 1, True),
              GemmConfig(128, 128, 64, 4, 4, 1, True)]
BF16_WGRADS = [GemmConfig(128, 128, 64, 8, 3), GemmConfig(128, 128, 64, 8, 3, tma=True),
               GemmConfig(128, 128, 64, 8, 4, tma=True), GemmConfig(128, 256, 64, 8, 3, tma=True),
               GemmConfig(256, 128, 64, 8, 3, tma=True), GemmConfig(128, 128, 64, 4, 4, tma=True)]
# The whole bf16 step (forward + backward) with these (GEMM tile, wgrad tile) pairs, beside the
# compose route.
STEPS = [(BF16_MAIN, BF16_WGRADS[0]), (BF16_GEMMS[1], BF16_WGRADS[1]), (BF16_GEMMS[3], BF16_WGRADS[3])]
# fp8_block: the tilings of the earlier profiles through pointers, and the leading ones with the
# float8 data through TMA (GemmConfig.tma: every role but the fc1 + GLU, launch.tma_plan).
# The 64x64 tile through TMA is the dGLU's (configs.dglu_config); 128x64 through TMA the wgrad
# heuristic (results/2026-12-02-h200-r runs 1 and 4-6).
FP8_GEMMS = [GemmConfig(128, 64, 128, 8, 3, 1), GemmConfig(128, 64, 128, 8, 4, 1), GemmConfig(128, 128, 128, 8, 3, 1),
             GemmConfig(64, 128, 128, 4, 3, 2), GemmConfig(64, 64, 128, 4, 4, 2), GemmConfig(128, 64, 128, 4, 3, 2),
             GemmConfig(128, 128, 128, 8, 3, 1, True), GemmConfig(64, 128, 128, 4, 3, 2, True),
             GemmConfig(64, 64, 128, 4, 3, 2, True)]
FP8_WGRADS = [GemmConfig(64, 128, 128, 4, 3), GemmConfig(128, 128, 128, 8, 3), GemmConfig(128, 128, 128, 8, 4),
              GemmConfig(64, 64, 128, 4, 3), GemmConfig(128, 64, 128, 4, 3), GemmConfig(128, 64, 128, 8, 3),
              GemmConfig(256, 128, 128, 8, 3), GemmConfig(64, 128, 128, 4, 3, tma=True),
              GemmConfig(128, 128, 128, 8, 3, tma=True), GemmConfig(128, 64, 128, 4, 3, tma=True)]

ROUNDS = 5
TIMER = None if DEVICE == "cuda" else timing.WallTimer()


def gemm_flop(m, n, k):
    return 2 * m * n * k


def table(title: str, providers: dict, flop: dict | float | None = None, rounds: int = ROUNDS) -> dict:
    """Time ``providers`` interleaved (graph replay) and print one line each; the timings."""
    print(f" {title}:", flush=True)
    t = timing.interleaved(providers, rounds=rounds, graphs=True, timer=TIMER)
    for name, r in t.items():
        if isinstance(r, Exception):
            print(f"  {name:36s} {error_text(r, 110)}", flush=True)
            continue
        f = flop.get(name) if isinstance(flop, dict) else flop
        rate = f" {f / (r.median_ms * 1e-3) / 1e12:6.0f} TFLOP/s" if f else ""
        print(f"  {name:36s} {r.median_ms:8.3f} ms{rate}  (spread {r.spread:.0%})", flush=True)
    return t


def ceilings(rounds):
    M, K, N = (512, 256, 256) if TINY else (16384, 4096, 7168)
    a = torch.randn(M, K, device=DEVICE, dtype=torch.bfloat16)
    b = torch.randn(N, K, device=DEVICE, dtype=torch.bfloat16)
    providers = {"bf16 matmul (cuBLAS)": lambda: a @ b.t()}
    if DEVICE == "cuda":
        a8, b8 = a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn)
        one = torch.ones((), device=DEVICE)
        providers["fp8 _scaled_mm (per-tensor scales)"] = lambda: torch._scaled_mm(
            a8, b8.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    table(f"dense ceilings {M}x{K}x{N}", providers, gemm_flop(M, N, K), rounds)


def problem(E, T, H, F):
    """(counts, x, probs, w1, w2, dy) of one shape: bf16, balanced counts."""
    i = random_inputs([T // E] * E, H, F, torch.bfloat16, bias=False, device=DEVICE)
    return i["counts"], i["x"], i["probs"], i["w1"], i["w2"], i["dy"]


def step(counts, x, probs, w1, w2, dy, recipe=None, wgrad_config=None, config=None):
    """One forward + backward (heuristic tiles unless ``config``) as the op runs it: the forward
    keeps fp8_block's dgrad weight copies for the backward."""
    _, z, h, kept = launch.forward(x, counts, probs, w1, w2, None, None, "swiglu", 32, config=config, recipe=recipe,
                                   keep_dgrad_weights=True)
    launch.backward(dy, x, counts, probs, w1, w2, None, None, z, h, "swiglu", 32, config=config,
                    wgrad_config=wgrad_config, recipe=recipe, dgrad_weights=kept)


def compose_step(counts, x, probs, w1, w2, dy):
    """One forward + backward of the compose route (compose.py)."""
    y, z, h, ends = compose.forward(x, counts, probs, w1, w2, None, None, "swiglu", 32)
    compose.backward(dy, x, counts, ends, probs, w1, w2, None, None, z, h, "swiglu", 32)


def profile_bf16(E, T, H, F, rounds):
    counts, x, probs, w1, w2, dy = problem(E, T, H, F)
    gemms = [GemmConfig(32, 32, 32, 4, 2, 2), GemmConfig(32, 32, 32, 4, 2, 2, True)] if TINY else BF16_GEMMS
    print(f"\nE {E} T {T} H {H} F {F}: bf16 (dGLU: configs.dglu_config of each tile; balanced counts)")
    for name, (ours, theirs, flop) in gemm_roles(counts, x, probs, w1, w2, dy).items():
        tiles = (BF16_WGRADS[:2] if TINY else BF16_WGRADS) if name.startswith("wgrads") else gemms
        if name == GLUON_WGRADS:   # the compose route's wgrads in Gluon (torch._grouped_mm off Hopper)
            tiles = [c for c in COMPOSE_CANDIDATES if not c.rows_block_n]
        if name == GLUON_ROWS:     # its row GEMMs in Gluon: each rows tile once
            tiles = [c for c in COMPOSE_CANDIDATES if c.rows_block_n and c.block_m == 256]
        providers = {}
        for c in tiles:   # each tile checked first: one that computes something else is not timed
            why = role_mismatch(name, ours, theirs, c) if DEVICE == "cuda" else None
            if why is not None:
                print(f"  {name} tilefuse {c.name}: left out: {why}")
                continue
            providers[f"tilefuse {c.name}"] = (lambda c=c, ours=ours: ours(c))
        if DEVICE == "cuda":
            providers["torch._grouped_mm"] = theirs
        table(name, providers, flop, rounds)
    if not TINY:
        inputs = (counts, x, probs, w1, w2, dy)
        steps = {"compose route": lambda: compose_step(*inputs)} if compose.takes(2, H, F) else {}
        for c, wc in STEPS:
            steps[f"fused {c.name} / wgrad {wc.name}"] = (lambda c=c, wc=wc: step(*inputs, config=c, wgrad_config=wc))
        table("whole step (forward + backward, 3x forward FLOPs)", steps,
              3 * (gemm_flop(T, 2 * F, H) + gemm_flop(T, H, F)), rounds)


def fp8_roles(counts, x, probs, w1, w2, dy, z, h, dz) -> dict:
    """{role: (run(cfg), flop)}: each fp8_block GEMM launch of a step on its quantized operands
    (z, h and dz given: the step's shapes), the fc2-dgrad + dGLU at ``cfg`` itself, and the two
    weight gradients together ("wgrads (dW1 + dW2)") on the column-wise copies."""
    r = "fp8_block"
    T, H = x.shape
    F = w2.shape[2]
    y, dx = torch.empty_like(x), torch.empty_like(x)
    hout, dzout = torch.empty_like(h), torch.empty_like(dz)
    dw1, dw2 = torch.empty_like(w1), torch.empty_like(w2)
    part = torch.empty(T, F // 16 + 1, device=x.device)
    xq, hq, dyq, dzq = (recipes.quantize_rows(r, t) for t in (x, h, dy, dz))
    w1q, w2q = recipes.quantize_weight(r, w1), recipes.quantize_weight(r, w2)
    w1t, w2t = recipes.quantize_weight(r, w1, transpose=True), recipes.quantize_weight(r, w2, transpose=True)
    cols = {name: recipes.quantize_cols(r, t, counts) for name, t in (("x", x), ("h", h), ("dy", dy), ("dz", dz))}
    return {
        "fc1+GLU": (lambda c: launch._gemm(EPI_GLU, xq, w1q, hout, counts, c, K=H, N=F, b_strides=None,
                                           ldc=hout.stride(0), F=F, probs=probs, z=z, act=0, interleave=32,
                                           recipe=r), gemm_flop(T, 2 * F, H)),
        "fc2": (lambda c: launch._gemm(EPI_STORE, hq, w2q, y, counts, c, K=F, N=H, b_strides=None, ldc=y.stride(0),
                                       probs=probs, recipe=r), gemm_flop(T, H, F)),
        "dgrad2+dGLU": (lambda c: launch._gemm(EPI_DGLU, dyq, w2t, dzout, counts, c, K=H, N=F, b_strides=None,
                                               ldc=dzout.stride(0), F=F, probs=probs, z=z, part=part, act=0,
                                               interleave=32, recipe=r), gemm_flop(T, F, H)),
        "dgrad1": (lambda c: launch._gemm(EPI_STORE, dzq, w1t, dx, counts, c, K=2 * F, N=H, b_strides=None,
                                          ldc=dx.stride(0), recipe=r), gemm_flop(T, H, 2 * F)),
        "wgrads (dW1 + dW2)": (lambda c: (launch._wgrad(cols["dz"], cols["x"], dw1, counts, T, c, r),
                                          launch._wgrad(cols["dy"], cols["h"], dw2, counts, T, c, r)),
                               gemm_flop(T, 2 * F, H) + gemm_flop(T, H, F)),
    }


def profile_fp8(E, T, H, F, rounds):
    r = "fp8_block"
    inputs = problem(E, T, H, F)
    counts, x, probs, w1, w2, dy = inputs
    z = torch.randn(T, 2 * F, device=DEVICE, dtype=torch.bfloat16)
    h = torch.randn(T, F, device=DEVICE, dtype=torch.bfloat16)
    dz = torch.randn(T, 2 * F, device=DEVICE, dtype=torch.bfloat16)
    print(f"\nE {E} T {T} H {H} F {F}: fp8_block (balanced counts)")
    quant = {
        "rows x": lambda: recipes.quantize_rows(r, x), "rows h": lambda: recipes.quantize_rows(r, h),
        "rows dy": lambda: recipes.quantize_rows(r, dy), "rows dz": lambda: recipes.quantize_rows(r, dz),
        "W1": lambda: recipes.quantize_weight(r, w1), "W2": lambda: recipes.quantize_weight(r, w2),
        "W1 dgrad": lambda: recipes.quantize_weight(r, w1, transpose=True),
        "W2 dgrad": lambda: recipes.quantize_weight(r, w2, transpose=True),
        "W1 pair": lambda: recipes.quantize_weight_pair(r, w1),
        "W2 pair": lambda: recipes.quantize_weight_pair(r, w2),
        "cols x": lambda: recipes.quantize_cols(r, x, counts), "cols h": lambda: recipes.quantize_cols(r, h, counts),
        "cols dy": lambda: recipes.quantize_cols(r, dy, counts), "cols dz": lambda: recipes.quantize_cols(r, dz, counts),
        "rows+cols x": lambda: recipes.quantize_rows_cols(r, x, counts),
        "rows+cols h": lambda: recipes.quantize_rows_cols(r, h, counts),
        "rows+cols dy": lambda: recipes.quantize_rows_cols(r, dy, counts),
    }
    tq = table("quantizers", quant, None, rounds)
    # what a step at interleave 32 runs: x's, h's and dy's pairs, dz's column-wise copy (the dGLU
    # epilogue writes its row-wise one) and the weight pairs
    used = ["rows+cols x", "rows+cols h", "rows+cols dy", "cols dz", "W1 pair", "W2 pair"]
    failed = [n for n in used if not isinstance(tq[n], timing.Timing)]
    if failed:   # a sum of the others would read as the step's total
        print(f"  a step's quantizers ({', '.join(used)}): incomplete, {', '.join(failed)} failed")
    else:
        print(f"  a step's quantizers ({', '.join(used)}): {sum(tq[n].median_ms for n in used):.3f} ms")
    roles = fp8_roles(counts, x, probs, w1, w2, dy, z, h, dz)
    gemms = FP8_GEMMS[:1] if TINY else FP8_GEMMS
    for name, (fn, flop) in roles.items():
        tiles = (FP8_WGRADS[:1] if TINY else FP8_WGRADS) if name.startswith("wgrads") else gemms
        table(name, {c.name: (lambda c=c, fn=fn: fn(c)) for c in tiles
                     if not (name == "dgrad2+dGLU" and c.block_n > 64)}, flop, rounds)
    steps = {f"fp8_block wgrad {wc.name if wc else 'heuristic'}": (lambda wc=wc: step(*inputs, recipe=r,
                                                                                       wgrad_config=wc))
             for wc in ((None,) if TINY else (None, FP8_WGRADS[1], FP8_WGRADS[2]))}
    steps["bf16"] = lambda: step(*inputs)
    table("whole step (launch.forward + backward, heuristic tiles, 3x forward FLOPs)", steps,
          3 * (gemm_flop(T, 2 * F, H) + gemm_flop(T, H, F)), rounds)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--recipes", default="bf16,fp8_block", help="bf16, fp8_block or both (default)")
    ap.add_argument("--shapes", default="1,2,3", help="comma-separated 1, 2, 3 (default all)")
    ap.add_argument("--rounds", type=int, default=ROUNDS, help=f"interleaved rounds (default {ROUNDS})")
    ap.add_argument("--tiny", action="store_true", help="one tiny shape; on a CPU, Triton's interpreter")
    args = ap.parse_args()
    gpu = torch.cuda.get_device_name() if DEVICE == "cuda" else "CPU (Triton interpreter: numbers mean nothing)"
    print(f"torch {torch.__version__}, triton {triton.__version__}, {gpu}")
    torch.manual_seed(0)
    rounds = 2 if TINY and DEVICE == "cpu" else args.rounds
    ceilings(rounds)
    shapes = [TINY_SHAPE] if TINY else [SHAPES[int(s)] for s in args.shapes.split(",")]
    for shape in shapes:
        for recipe in args.recipes.split(","):
            {"bf16": profile_bf16, "fp8_block": profile_fp8}[recipe](*shape, rounds)
            if DEVICE == "cuda":
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
