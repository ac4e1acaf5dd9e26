"""Host (CPU) time per DyT call on a tiny CUDA tensor, where GPU time is negligible: the
layers between ``tilefuse.dyt`` and the kernel launch, timed one by one, then profiled.

    PYTHONPATH=src python benchmarks/host_overhead.py
"""

import cProfile
import pstats
import time

import torch

import tilefuse
from tilefuse.ops.dyt import launch
from tilefuse.ops.dyt.op import dyt_op


def per_call_us(fn, n=2000):
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(n):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t) / n * 1e6


def tiny_inputs():
    """x, alpha, weight, bias (requiring grad) and dy for a 64 x 16 problem on the GPU."""
    x = torch.randn(64, 16, device="cuda", requires_grad=True)
    a = torch.full((1,), 0.5, device="cuda", requires_grad=True)
    w = torch.ones(16, device="cuda", requires_grad=True)
    b = torch.zeros(16, device="cuda", requires_grad=True)
    return x, a, w, b, torch.randn(64, 16, device="cuda")


def main():
    x, a, w, b, dy = tiny_inputs()
    cfg = launch.pick_config(launch.problem_for(x, True, "fwd"))
    xd, ad, wd, bd = (t.detach() for t in (x, a, w, b))
    rows = {
        "launch.forward(config given)": lambda: launch.forward(xd, ad, wd, bd, True, config=cfg),
        "launch.forward": lambda: launch.forward(xd, ad, wd, bd, True),
        "dyt_op, no grad": lambda: dyt_op(xd, ad, wd, bd, True),
        "tilefuse.dyt, no grad": lambda: tilefuse.dyt(xd, ad, wd, bd),
        "tilefuse.dyt, grad": lambda: tilefuse.dyt(x, a, w, b),
        "tilefuse.dyt fwd+bwd": lambda: torch.autograd.grad(tilefuse.dyt(x, a, w, b), (x, a, w, b), dy),
        "dyt_op (custom op) fwd+bwd": lambda: torch.autograd.grad(dyt_op(x, a, w, b, True), (x, a, w, b), dy),
        "eager fwd": lambda: w * torch.tanh(a * x) + b,
        "torch.empty_like": lambda: torch.empty_like(xd),
    }
    for name, fn in rows.items():
        print(f"{name:32s} {per_call_us(fn):8.1f} us/call", flush=True)
    if "--profile" not in __import__("sys").argv:
        return
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(500):
        torch.autograd.grad(tilefuse.dyt(x, a, w, b), (x, a, w, b), dy)
    torch.cuda.synchronize()
    prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(22)


if __name__ == "__main__":
    main()
