"""Issue 16 (GPU): run 1's profile put the side stream's host cost inside
ComposeFunctionBackward's own Python (about 0.67 ms a call against 0.32 ms without the side
stream, spec shape 2), while its stream operations cost 5-15 us each (run 1). Here the
backward's pieces are timed with perf_counter wrappers (host microseconds a call, 50 calls
after warm-up, synchronised between calls): compose.BackwardPlan.run whole, each _gemm, and
streams.on_side / join, with the side stream and without.

    PYTHONPATH=src python3 benchmarks/results/2026-12-04-h200-ah/host_stream_split.py
"""
import collections
import time

import torch

import tilefuse
from tilefuse.ops.grouped_glu_mlp import compose, streams
from tilefuse.ops.grouped_glu_mlp.reference import random_inputs
from tilefuse.ops.grouped_glu_mlp.tune import DEFAULT_SHAPES

SPENT = collections.defaultdict(float)


def timed(owner, name, label=None):
    fn = getattr(owner, name)

    def wrapper(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            key = label or name
            if key == "_gemm":
                key = f"_gemm {args[1]}"
            SPENT[key] += time.perf_counter() - t0
    setattr(owner, name, wrapper)


def main():
    print(torch.__version__, torch.cuda.get_device_name(), flush=True)
    timed(compose.BackwardPlan, "run", "BackwardPlan.run")
    timed(compose.BackwardPlan, "_gemm")
    timed(streams, "on_side", "streams.on_side")
    timed(streams, "join", "streams.join")
    timed(streams, "side_stream", "streams.side_stream")
    E, T, H, Fd = DEFAULT_SHAPES[1]
    i = random_inputs([T // E] * E, H, Fd, torch.bfloat16, bias=False, device="cuda",
                      generator=torch.Generator().manual_seed(2))
    c, dy = i["counts"], i["dy"]
    leaves = [i[k].detach().requires_grad_() for k in ("x", "probs", "w1", "w2")]

    def step():
        out = tilefuse.grouped_glu_mlp(leaves[0], c, *leaves[1:], glu_interleave=32)
        return torch.autograd.grad(out, leaves, dy)
    calls = 50
    for beside in (True, False, True, False):
        streams.BESIDE = beside
        for _ in range(5):
            step()
        torch.cuda.synchronize()
        SPENT.clear()
        wall = 0.0
        for _ in range(calls):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            step()
            wall += time.perf_counter() - t0
        torch.cuda.synchronize()
        print(f"\nside stream {'on' if beside else 'off'}: fwd+bwd call {wall / calls * 1e6:.1f} us")
        for k, v in sorted(SPENT.items()):
            print(f"  {k}: {v / calls * 1e6:.1f} us a call")
    streams.BESIDE = True


if __name__ == "__main__":
    main()
