"""Issue 16 (GPU): fp8_block's weight gradients through the warp-specialised Gluon kernel
(ws_fp8_wgrad) against grouped_wgrad_kernel (the Triton launch it replaces) and the bf16
wgrads (ws_wgrad's Gluon kernel, torch._grouped_mm), dW1 = dz^T x and dW2 = dy^T h at the spec's
three shapes, balanced and routed (skewed) counts; then the whole fp8_block forward + backward
as called (the table's ws config) with the Gluon wgrads and with the Triton ones, beside bf16
tilefuse, interleaved. Bits of the Gluon kernel against the Triton one checked at every case.

    PYTHONPATH=src python3 benchmarks/results/2026-12-05-h200-ak/wgrad.py [--shapes 1,2,3]
"""
import argparse
import statistics

import torch
import triton
import triton.testing

import tilefuse
from tilefuse.ops.grouped_glu_mlp import launch, recipes, ws_fp8_wgrad, ws_wgrad
from tilefuse.ops.grouped_glu_mlp.configs import heuristic
from tilefuse.ops.grouped_glu_mlp.tune import DEFAULT_SHAPES
from tilefuse.ops.grouped_glu_mlp.reference import random_inputs


def counts_for(E, T, routed, g):
    if not routed:
        base = [T // E] * E
        base[-1] += T - sum(base)
        return base
    w = torch.rand(E, generator=g) ** 2 + 0.05
    c = (w / w.sum() * T).floor().to(torch.int64)
    c[0] += T - int(c.sum())
    return c.tolist()


def bench(fn, reps=50):
    return triton.testing.do_bench(fn, warmup=10, rep=reps, return_mode="median")


def wgrads(E, T, H, F, routed):
    g = torch.Generator().manual_seed(E + T)
    counts = counts_for(E, T, routed, g)
    c = torch.tensor(counts, dtype=torch.int32, device="cuda")
    offs = torch.cumsum(c, 0).to(torch.int32)
    dz = torch.randn(T, 2 * F, generator=g).bfloat16().cuda()
    x = torch.randn(T, H, generator=g).bfloat16().cuda()
    dy = torch.randn(T, H, generator=g).bfloat16().cuda()
    h = torch.randn(T, F, generator=g).bfloat16().cuda()
    wcfg = heuristic("wgrad", 2, "fp8_block")
    rows = []
    for name, a, b, N, M in (("dW1", dz, x, 2 * F, H), ("dW2", dy, h, H, F)):
        qa, qb = recipes.quantize_cols("fp8_block", a), recipes.quantize_cols("fp8_block", b)
        out = {k: torch.full((E, N, M), float("nan"), dtype=torch.bfloat16, device="cuda") for k in "tgw"}
        cands = {
            "fp8 triton": lambda: launch._wgrad(qa, qb, out["t"], c, T, wcfg, "fp8_block"),
            "fp8 gluon s5": lambda: ws_fp8_wgrad.launch(qa, qb, out["g"], c, stages=5),
            "fp8 gluon s4": lambda: ws_fp8_wgrad.launch(qa, qb, out["g"], c, stages=4),
            "bf16 gluon": lambda: ws_wgrad.launch(a, b, out["w"], c, block_m=256, stages=3),
            "bf16 cutlass": lambda: torch._grouped_mm(a.t(), b, offs=offs),
        }
        for fn in cands.values():
            fn()
        torch.cuda.synchronize()
        same = torch.equal(out["t"].view(torch.int16), out["g"].view(torch.int16))
        times = {k: [] for k in cands}
        for _ in range(3):   # interleaved rounds
            for k, fn in cands.items():
                times[k].append(bench(fn))
        flop = 2.0 * T * N * M
        row = {k: statistics.median(v) for k, v in times.items()}
        rows.append((name, same, row, flop))
    return rows


def op_step(i, recipe):
    def run():
        for t in i["leaves"]:
            t.grad = None
        y = tilefuse.grouped_glu_mlp(i["x"], i["counts"], i["probs"], i["w1"], i["w2"], activation="swiglu",
                                     glu_interleave=32, recipe=recipe)
        y.backward(i["dy"])
    return run


def whole_op(E, T, H, F):
    counts = [T // E] * E
    i = random_inputs(counts, H, F, torch.bfloat16, bias=False, device="cuda",
                      generator=torch.Generator().manual_seed(1))
    for k in ("x", "w1", "w2", "probs"):
        i[k].requires_grad_(True)
    i["leaves"] = [i[k] for k in ("x", "w1", "w2", "probs")]
    steps = {"bf16 tilefuse": (op_step(i, None), True), "fp8 gluon wgrads": (op_step(i, "fp8_block"), True),
             "fp8 triton wgrads": (op_step(i, "fp8_block"), False)}
    times = {k: [] for k in steps}
    for _ in range(3):
        for k, (fn, takes) in steps.items():
            ws_fp8_wgrad.TAKES_WGRAD = takes
            fn()
            times[k].append(bench(fn, reps=200))
    ws_fp8_wgrad.TAKES_WGRAD = True
    return {k: statistics.median(v) for k, v in times.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="1,2,3")
    ap.add_argument("--no-op", action="store_true")
    args = ap.parse_args()
    print(torch.cuda.get_device_name(), torch.__version__, triton.__version__)
    for s in map(int, args.shapes.split(",")):
        E, T, H, F = DEFAULT_SHAPES[s - 1]
        for routed in (False, True):
            for name, same, row, flop in wgrads(E, T, H, F, routed):
                best_bf16 = min(row["bf16 gluon"], row["bf16 cutlass"])
                print(f"shape {s} {'routed  ' if routed else 'balanced'} {name} bitwise={same} "
                      + " ".join(f"{k}={v * 1e3:.1f}us({flop / v / 1e9:.0f}TF)" for k, v in row.items())
                      + f" gluon/triton={row['fp8 triton'] / row['fp8 gluon s5']:.3f}x"
                      + f" gluon/bf16best={best_bf16 / row['fp8 gluon s5']:.3f}x", flush=True)
        if not args.no_op:
            r = whole_op(E, T, H, F)
            print(f"shape {s} op fwd+bwd ms: " + " ".join(f"{k}={v:.3f}" for k, v in r.items())
                  + f" fp8(gluon)/bf16={r['bf16 tilefuse'] / r['fp8 gluon wgrads']:.3f}x"
                  + f" fp8(triton)/bf16={r['bf16 tilefuse'] / r['fp8 triton wgrads']:.3f}x", flush=True)


if __name__ == "__main__":
    main()
