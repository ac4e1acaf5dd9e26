"""Issue 17 probe, step 3 (GPU): the node built by hand (as PyTorch's generated autograd code
builds its nodes: dyt_node.cpp's forward_node) beside the torch::autograd::Function node of runs
1-2, with and without launches; and the host time spent inside each cuLaunchKernel and in the
hand-built backward's body (counters in dyt_node.cpp), to see where run 2's backward time went.

    PYTHONPATH=src python3 benchmarks/results/2026-12-04-h200-af/dyt_node_probe3.py [--alpha-fixed]

``--alpha-fixed`` (run 8): alpha does not require grad in the host timing, so tilefuse's calls
differentiate three inputs, as F.layer_norm's do (x, weight, bias).
"""
import argparse
import statistics
import sys

import torch
import torch.nn.functional as F

import tilefuse
from tilefuse.check import dyt as check_dyt

sys.path.insert(0, __import__("os").path.dirname(__file__))
import dyt_node_probe as p1  # noqa: E402


def plan_for(mod, x, a, w, b, dy, launches=True):
    plan = p1.native_plan(mod, x, a, w, b, dy)
    for slot, k in enumerate((plan.fwd, plan.bwd_main, plan.bwd_reduce)):
        k.slot = slot
        if not launches:
            k.grid = 0
    return plan


def check(mod):
    bad = 0
    for shape, dtype, bias in (((64, 256), torch.float32, True), ((1000, 100), torch.float32, False),
                               ((4096, 1024), torch.bfloat16, True)):
        x, a, w, b, dy = p1.inputs(shape, dtype, bias)
        plan = plan_for(mod, x, a, w, b, dy)
        leaves = [t for t in (x, a, w, b) if t is not None]
        ref_y = tilefuse.dyt(x, a, w, b)
        ref = (ref_y, *torch.autograd.grad(ref_y, leaves, dy))
        y = mod.forward_node(plan, x, a, w, b)
        got = (y, *torch.autograd.grad(y, leaves, dy))
        same = all(p.dtype == q.dtype and torch.equal(p, q) for p, q in zip(ref, got))
        bad += not same
        print(f"check hand-built node {shape} {dtype} bias={bias}: grad_fn {y.grad_fn.name()}, "
              f"{'bitwise tilefuse.dyt' if same else 'DIFFERS'}", flush=True)
    return bad


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--alpha-fixed", action="store_true")
    args = ap.parse_args()
    mod = p1.build()
    bad = check(mod)
    x, a, w, b, dy = p1.inputs((64, 256), torch.float32, True)
    plan, bare = plan_for(mod, x, a, w, b, dy), plan_for(mod, x, a, w, b, dy, launches=False)
    leaves = (x, a, w, b)
    if args.alpha_fixed:
        a.requires_grad_(False)
        leaves = (x, w, b)
        print("alpha fixed: three inputs differentiated")
    fwd = {
        "torch.tanh": lambda: torch.tanh(x),
        "F.layer_norm": lambda: F.layer_norm(x, (256,), w, b),
        "tilefuse.dyt": lambda: tilefuse.dyt(x, a, w, b),
        "Function node": lambda: mod.forward(plan, x, a, w, b),
        "hand-built node": lambda: mod.forward_node(plan, x, a, w, b),
        "hand-built, no launches": lambda: mod.forward_node(bare, x, a, w, b),
        "Function, no launches": lambda: mod.forward(bare, x, a, w, b),
    }
    used = {"F.layer_norm": (x, w, b), "torch.tanh": (x,)}
    cases = {}
    for name, f in fwd.items():
        cases[(name, "fwd")] = f
        cases[(name, "fwd+bwd")] = (lambda f=f, inp=used.get(name, leaves): torch.autograd.grad(f(), inp, dy))
    samples = {k: [] for k in cases}
    keys = list(cases)
    rounds = 9
    for r in range(rounds):
        for k in keys[r % len(keys):] + keys[:r % len(keys)]:
            samples[k].append(check_dyt.median_per_call_us(cases[k], 300, 1))
    print(f"\nhost us per call, 64x256 fp32, median of {rounds} interleaved rounds of 300 synchronised calls")
    print("| provider | fwd us | x layer_norm | fwd+bwd us | x layer_norm |\n|---|---|---|---|---|")
    ref = {p: statistics.median(samples[("F.layer_norm", p)]) for p in ("fwd", "fwd+bwd")}
    for name in fwd:
        cells = []
        for p in ("fwd", "fwd+bwd"):
            v = statistics.median(samples[(name, p)])
            cells += [f"{v:.1f}", f"{v / ref[p]:.2f}x"]
        print(f"| {name} | " + " | ".join(cells) + " |")
    print("\nhost ns inside the calls, per call (300 fwd+bwd calls, synchronised once):")
    for name in ("Function node", "hand-built node"):
        f = cases[(name, "fwd+bwd")]
        mod.counters(True)
        torch.cuda.synchronize()
        for _ in range(300):
            f()
        torch.cuda.synchronize()
        c = mod.counters(True)
        per = [c[i] / max(c[3 + i], 1) for i in range(3)]
        print(f"  {name}: cuLaunchKernel forward {per[0]:.0f}, backward {per[1]:.0f}, reduction {per[2]:.0f} "
              f"({c[3]}, {c[4]}, {c[5]} launches); hand-built backward body {c[6] / 300:.0f}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
