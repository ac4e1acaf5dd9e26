"""Issue 17 probe, step 2 (GPU): where does the C++ node's host time go? Run 1 measured the
node at tilefuse.dyt's cost (35 us a forward call against F.layer_norm's 19). Here the node runs
with its launches skipped (grid 0) beside the full node, and torch.profiler gives the kernels'
device time, to tell launch cost, GPU time and autograd machinery apart.

    PYTHONPATH=src python3 benchmarks/results/2026-12-04-h200-af/dyt_node_probe2.py
"""
import statistics
import sys

import torch
import torch.nn.functional as F

import tilefuse
from tilefuse.check import dyt as check_dyt

sys.path.insert(0, __import__("os").path.dirname(__file__))
import dyt_node_probe as p1  # noqa: E402


def main():
    mod = p1.build()
    x, a, w, b, dy = p1.inputs((64, 256), torch.float32, True)
    plan = p1.native_plan(mod, x, a, w, b, dy)
    bare = p1.native_plan(mod, x, a, w, b, dy)
    for k in (bare.fwd, bare.bwd_main, bare.bwd_reduce):
        k.grid = 0                      # Kernel.launch returns before cuLaunchKernel
    leaves = (x, a, w, b)
    xd = x.detach()
    fwd = {
        "torch.tanh": lambda: torch.tanh(x),
        "F.layer_norm": lambda: F.layer_norm(x, (256,), w, b),
        "tilefuse.dyt": lambda: tilefuse.dyt(x, a, w, b),
        "node": lambda: mod.forward(plan, x, a, w, b),
        "node, no launches": lambda: mod.forward(bare, x, a, w, b),
        "torch.empty_like": lambda: torch.empty_like(xd),
    }
    used = {"F.layer_norm": (x, w, b), "torch.tanh": (x,)}
    cases = {}
    for name, f in fwd.items():
        cases[(name, "fwd")] = f
        if name != "torch.empty_like":
            cases[(name, "fwd+bwd")] = (lambda f=f, inp=used.get(name, leaves): torch.autograd.grad(f(), inp, dy))
    samples = {k: [] for k in cases}
    keys = list(cases)
    rounds = 7
    for r in range(rounds):
        for k in keys[r % len(keys):] + keys[:r % len(keys)]:
            samples[k].append(check_dyt.median_per_call_us(cases[k], 300, 1))
    print(f"host us per call, 64x256 fp32, median of {rounds} interleaved rounds of 300 synchronised calls")
    for k in keys:
        print(f"  {k[0]:22s} {k[1]:8s} {statistics.median(samples[k]):7.1f}")
    from torch.profiler import ProfilerActivity, profile
    for name in ("node", "tilefuse.dyt", "F.layer_norm"):
        f = cases[(name, "fwd+bwd")]
        for _ in range(20):
            f()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as prof:
            for _ in range(50):
                f()
            torch.cuda.synchronize()
        print(f"\n{name}: fwd+bwd x 50, torch.profiler")
        print(prof.key_averages().table(sort_by="self_cuda_time_total", row_limit=8, max_name_column_width=60))


if __name__ == "__main__":
    main()
