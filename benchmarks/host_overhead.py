"""What does one DyT call cost the host, layer by layer from ``tilefuse.dyt`` down to the launch?

On a tiny CUDA tensor (64 x 16, GPU time negligible) each layer between the public API and
the kernel launch is timed alone (per-call microseconds of a synchronised loop of ``--calls``
calls, forward and backward), beside the eager PyTorch expression and a bare
``torch.empty_like``; ``--profile`` adds cProfile tables (tottime of 500 forward + backward
calls through ``tilefuse.dyt``, cumtime of 300 ``launch.backward`` calls). grouped_glu_mlp's
host time per call is in ``tilefuse bench --ops grouped_glu_mlp`` (host p50 columns).

    PYTHONPATH=src python3 benchmarks/host_overhead.py [--calls 2000] [--profile]

Prints one line per layer: name, us/call. Time on the H200 machine: about 20 s (60 s with
``--profile``); the numbers are the host's (its CPU, Python, torch), not the GPU's. Without a
GPU it runs in Triton's interpreter (``TRITON_INTERPRET=1``, e.g. ``--calls 3``): a smoke
test, the numbers mean nothing.
"""

import argparse
import cProfile
import os
import pstats
import time

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")   # before tilefuse imports triton.language

import tilefuse  # noqa: E402
from tilefuse.ops.dyt import launch, op  # noqa: E402
from tilefuse.ops.dyt.op import dyt_op  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def sync():
    if DEVICE == "cuda":
        torch.cuda.synchronize()


def per_call_us(fn, n=2000):
    for _ in range(min(20, n)):
        fn()
    sync()
    t = time.perf_counter()
    for _ in range(n):
        fn()
    sync()
    return (time.perf_counter() - t) / n * 1e6


def tiny_inputs():
    """x, alpha, weight, bias (requiring grad) and dy for a 64 x 16 problem."""
    x = torch.randn(64, 16, device=DEVICE, requires_grad=True)
    a = torch.full((1,), 0.5, device=DEVICE, requires_grad=True)
    w = torch.ones(16, device=DEVICE, requires_grad=True)
    b = torch.zeros(16, device=DEVICE, requires_grad=True)
    return x, a, w, b, torch.randn(64, 16, device=DEVICE)


def rows(x, a, w, b, dy):
    xd, ad, wd, bd = (t.detach() for t in (x, a, w, b))
    fwd = launch.pick_config(launch.problem_for(xd, True, "fwd"))
    bwd = launch.pick_config(launch.problem_for(xd, True, "bwd"))
    return {
        "launch.forward(config given)": lambda: launch.forward(xd, ad, wd, bd, True, config=fwd),
        "launch.forward": lambda: launch.forward(xd, ad, wd, bd, True),
        "dyt_op, no grad": lambda: dyt_op(xd, ad, wd, bd, True),
        "tilefuse.dyt, no grad": lambda: tilefuse.dyt(xd, ad, wd, bd),
        "tilefuse.dyt, grad": lambda: tilefuse.dyt(x, a, w, b),
        "launch.backward(config given)": lambda: launch.backward(dy, xd, ad, wd, bd, True, config=bwd),
        "launch.backward": lambda: launch.backward(dy, xd, ad, wd, bd, True),
        "op.backward_impl": lambda: op.backward_impl(dy, xd, ad, wd, bd, True),
        "tilefuse.dyt fwd+bwd autograd.grad": lambda: torch.autograd.grad(tilefuse.dyt(x, a, w, b), (x, a, w, b), dy),
        "tilefuse.dyt fwd+bwd y.backward": lambda: tilefuse.dyt(x, a, w, b).backward(dy),
        "dyt_op (custom op) fwd+bwd": lambda: torch.autograd.grad(dyt_op(x, a, w, b, True), (x, a, w, b), dy),
        "eager fwd": lambda: w * torch.tanh(a * x) + b,
        "eager fwd+bwd autograd.grad": lambda: torch.autograd.grad(w * torch.tanh(a * x) + b, (x, a, w, b), dy),
        "torch.empty_like": lambda: torch.empty_like(xd),
    }


def profile(x, a, w, b, dy):
    xd, ad, wd, bd = (t.detach() for t in (x, a, w, b))
    for title, fn, n, key in (("tilefuse.dyt fwd+bwd", lambda: torch.autograd.grad(
            tilefuse.dyt(x, a, w, b), (x, a, w, b), dy), 500, "tottime"),
            ("launch.backward", lambda: launch.backward(dy, xd, ad, wd, bd, True), 300, "cumtime")):
        print(f"\ncProfile: {n} calls of {title}, by {key}")
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(n):
            fn()
        sync()
        prof.disable()
        pstats.Stats(prof).sort_stats(key).print_stats(22)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=2000, help="calls per timed loop (default 2000)")
    ap.add_argument("--profile", action="store_true", help="cProfile tables after the timings")
    args = ap.parse_args()
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name() if DEVICE == 'cuda' else 'CPU interpreter'}")
    inputs = tiny_inputs()
    for name, fn in rows(*inputs).items():
        print(f"{name:36s} {per_call_us(fn, args.calls):8.1f} us/call", flush=True)
    if args.profile:
        profile(*inputs)


if __name__ == "__main__":
    main()
