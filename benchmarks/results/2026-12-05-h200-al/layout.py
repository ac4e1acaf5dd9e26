"""Issue 16 (GPU): fp8_block's column-wise copies grouped by expert (each expert's tokens in
blocks of its own, from its first token) against the layout before (blocks of the global token
index, an expert sharing its first and last block with its neighbours), one tree per process:
run it from each tree's src in alternating processes (run1.sh). At the spec's three shapes,
balanced and routed (skewed) counts: dy's row-wise + column-wise pair (one launch), dz's
column-wise copy, the fp8 weight gradients dW1 = dz^T x and dW2 = dy^T h from those copies
(grouped_wgrad_kernel at the op's heuristic tile), CUTLASS's bf16 wgrads on the same tensors
(``torch._grouped_mm``, the peer, in the same process), and the whole op forward + backward as
called, fp8_block and bf16, with the same counts, at interleave 32 and in the halves layout
(where the tree of the change also writes dz's two copies from one launch); the routed fp8
step at shapes 2-3 also profiled kernel by kernel (torch.profiler, 5 steps). 3 interleaved rounds of
``triton.testing.do_bench`` medians. The fp8 wgrads are checked against float64 GEMMs of the
dequantized copies (recipes.dequant_cols of the tree that runs) at a sample of experts.

    PYTHONPATH=src python3 benchmarks/results/2026-12-05-h200-al/layout.py --tag grouped [--shapes 1,2,3]

``--smoke`` runs one tiny problem on the CPU (TRITON_INTERPRET=1), each candidate once, timed
with perf_counter: a check of the script, not a measurement.
"""
import argparse
import inspect
import json
import statistics
import time

import torch
import triton
import triton.testing

import tilefuse
from tilefuse.check import bench as check_bench
from tilefuse.ops.grouped_glu_mlp import launch, recipes
from tilefuse.ops.grouped_glu_mlp.configs import heuristic
from tilefuse.ops.grouped_glu_mlp.reference import random_inputs
from tilefuse.ops.grouped_glu_mlp.tune import DEFAULT_SHAPES

# The tree before the change takes no counts in its column-wise quantizers.
GROUPED = "counts" in inspect.signature(recipes.quantize_cols).parameters


def cols(t, c):
    return recipes.quantize_cols("fp8_block", t, c) if GROUPED else recipes.quantize_cols("fp8_block", t)


def rows_cols(t, c):
    return recipes.quantize_rows_cols("fp8_block", t, c) if GROUPED else recipes.quantize_rows_cols("fp8_block", t)


def dequant(t, c):
    return recipes.dequant_cols("fp8_block", t, c) if GROUPED else recipes.dequant_cols("fp8_block", t)


def counts_for(E, T, routed, g):
    """Balanced: T / E each. Routed: weights u^2 + 0.05 (u uniform), floored, the rest to
    expert 0 (-ak run 1's counts)."""
    if not routed:
        return [T // E] * E
    w = torch.rand(E, generator=g) ** 2 + 0.05
    c = (w / w.sum() * T).floor().to(torch.int64)
    c[0] += T - int(c.sum())
    return c.tolist()


DEVICE = "cuda"
PROFILE: set = set()   # shapes whose routed fp8 step is profiled (--profile)
SHAPES = dict(enumerate(DEFAULT_SHAPES, 1))
SHAPES[0] = (4, 600, 256, 128)   # --smoke


def bench(fn, rep=50):
    if DEVICE == "cpu":
        t0 = time.perf_counter()
        fn()
        return (time.perf_counter() - t0) * 1e3
    return triton.testing.do_bench(fn, warmup=10, rep=rep, return_mode="median")


def check_wgrad(out, a, b, c, counts, experts):
    """Max |out - float64 GEMM of the dequantized copies| / max |reference| over ``experts``."""
    a64, b64 = dequant(a, c).double(), dequant(b, c).double()
    starts = [0]
    for n in counts:
        starts.append(starts[-1] + n)
    worst = 0.0
    for e in experts:
        s, t = starts[e], starts[e + 1]
        want = a64[s:t].t() @ b64[s:t]
        scale = float(want.abs().max()) or 1.0
        worst = max(worst, float((out[e].double() - want).abs().max()) / scale)
    return worst


def op_step(i, recipe, interleave=32):
    def run():
        for t in i["leaves"]:
            t.grad = None
        y = tilefuse.grouped_glu_mlp(i["x"], i["counts"], i["probs"], i["w1"], i["w2"], activation="swiglu",
                                     glu_interleave=interleave, recipe=recipe)
        y.backward(i["dy"])
    return run


def case(shape, routed):
    E, T, H, F = SHAPES[shape]
    g = torch.Generator().manual_seed(E + T)
    counts = counts_for(E, T, routed, g)
    c = torch.tensor(counts, dtype=torch.int32, device=DEVICE)
    offs = torch.cumsum(c, 0).to(torch.int32)
    dz = torch.randn(T, 2 * F, generator=g).bfloat16().to(DEVICE)
    x = torch.randn(T, H, generator=g).bfloat16().to(DEVICE)
    dy = torch.randn(T, H, generator=g).bfloat16().to(DEVICE)
    h = torch.randn(T, F, generator=g).bfloat16().to(DEVICE)
    wcfg = heuristic("wgrad", 2, "fp8_block")
    q = {"dz": cols(dz, c), "x": cols(x, c), "dy": rows_cols(dy, c)[1], "h": cols(h, c)}
    out = {n: torch.full((E, 2 * F, H) if n == "dW1" else (E, H, F), float("nan"), dtype=torch.bfloat16,
                         device=DEVICE) for n in ("dW1", "dW2")}
    cands = {
        "dy pair": lambda: rows_cols(dy, c),
        "dz cols": lambda: cols(dz, c),
        "dW1 fp8": lambda: launch._wgrad(q["dz"], q["x"], out["dW1"], c, T, wcfg, "fp8_block"),
        "dW2 fp8": lambda: launch._wgrad(q["dy"], q["h"], out["dW2"], c, T, wcfg, "fp8_block"),
        "dW1 bf16 cutlass": lambda: torch._grouped_mm(dz.t(), x, offs=offs),
        "dW2 bf16 cutlass": lambda: torch._grouped_mm(dy.t(), h, offs=offs),
    }
    for fn in cands.values():
        fn()
    if DEVICE == "cuda":
        torch.cuda.synchronize()
    sample = sorted({0, 1, E // 2, E - 1})
    err = {"dW1": check_wgrad(out["dW1"], dz, x, c, counts, sample),
           "dW2": check_wgrad(out["dW2"], dy, h, c, counts, sample)}
    i = random_inputs(counts, H, F, torch.bfloat16, bias=False, device=DEVICE,
                      generator=torch.Generator().manual_seed(1))
    for k in ("x", "w1", "w2", "probs"):
        i[k].requires_grad_(True)
    i["leaves"] = [i[k] for k in ("x", "w1", "w2", "probs")]
    steps = {"op fp8_block": op_step(i, "fp8_block"), "op bf16": op_step(i, None),
             "op fp8_block halves": op_step(i, "fp8_block", None), "op bf16 halves": op_step(i, None, None)}
    for fn in steps.values():
        fn()
    times = {k: [] for k in (*cands, *steps)}
    for _ in range(1 if DEVICE == "cpu" else 3):   # interleaved rounds
        for k, fn in cands.items():
            times[k].append(bench(fn))
        for k, fn in steps.items():
            times[k].append(bench(fn, rep=200))
    ms = {k: statistics.median(v) for k, v in times.items()}
    if PROFILE and routed and shape in PROFILE:   # where the fp8 step's time goes, kernel by kernel
        rows, _ = check_bench.kernel_times(steps["op fp8_block"], DEVICE, 5)
        total = sum(r["us"] for r in rows) / 1e3
        print(f"profile: fp8_block step, shape {shape} routed, {total:.3f} ms of kernels a step", flush=True)
        for r in rows[:8]:
            print(f"  {r['us'] / 1e3:8.3f} ms {r['calls']:5.1f}x  {r['kernel'][:90]}", flush=True)
    return {"shape": shape, "routed": routed, "counts_min": min(counts), "counts_max": max(counts),
            "err": err, "ms": ms}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tag", required=True, help="the tree's name in the output (grouped / global)")
    ap.add_argument("--shapes", default="1,2,3")
    ap.add_argument("--json", help="append one JSON line per case here")
    ap.add_argument("--smoke", action="store_true", help="one tiny problem on the CPU (interpreter)")
    ap.add_argument("--profile", default="2,3",
                    help="shapes whose routed fp8 step is profiled with torch.profiler (default 2,3; '' for none)")
    args = ap.parse_args()
    global DEVICE
    PROFILE.update(int(v) for v in args.profile.split(",") if v.strip())
    if args.smoke:
        DEVICE, args.shapes = "cpu", "0"
        PROFILE.add(0)
    assert (args.tag == "grouped") == GROUPED, f"--tag {args.tag} but the tree's layout is " \
                                               f"{'grouped' if GROUPED else 'global'}"
    print(torch.cuda.get_device_name() if DEVICE == "cuda" else "cpu", torch.__version__, triton.__version__, args.tag, flush=True)
    for s in map(int, args.shapes.split(",")):
        for routed in (False, True):
            r = case(s, routed)
            r["tag"] = args.tag
            ms = r["ms"]
            print(f"{args.tag:7s} shape {s} {'routed  ' if routed else 'balanced'} "
                  + " ".join(f"{k.replace(' ', '_')}={v * 1e3:.1f}us" for k, v in ms.items() if not k.startswith("op"))
                  + f" op_fp8={ms['op fp8_block']:.3f}ms op_bf16={ms['op bf16']:.3f}ms"
                  + f" fp8/bf16={ms['op bf16'] / ms['op fp8_block']:.3f}x"
                  + f" halves: op_fp8={ms['op fp8_block halves']:.3f}ms op_bf16={ms['op bf16 halves']:.3f}ms"
                  + f" err dW1={r['err']['dW1']:.2e} dW2={r['err']['dW2']:.2e}", flush=True)
            if args.json:
                with open(args.json, "a") as f:
                    f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
