"""Issue 16 (GPU; prepared): can the second stream's fork and join cost less host time? Run 2
measured a fork at 60-80 us in place (run 1: 27 us for its parts alone) and the join at 19 us.
Host microseconds per forward + backward call of ``tilefuse.grouped_glu_mlp`` (the spec's
measurement: warm, synchronise before each call, time only the call, p50; 3 interleaved rounds
of 100 calls) at the spec's three shapes, bf16, interleave 32, with streams.on_side / join as
shipped and replaced by:

- ``reused events``: one fork and one join event per thread, recorded and waited for, instead
  of torch's wait_stream (a new event each time); the stream switch as shipped;
- ``reused events, set_stream``: the same with torch.cuda.set_stream to the side stream and
  back instead of the torch.cuda.stream context;

beside the op on one stream (streams.BESIDE off). Each variant's bits are compared with the
shipped one's first (the same kernels in the same order: they must be equal).

    PYTHONPATH=src python3 benchmarks/results/2026-12-04-h200-ah/host_fork_variants.py
"""
import sys
import threading
from pathlib import Path

import torch

import tilefuse
from tilefuse.ops.grouped_glu_mlp import streams
from tilefuse.ops.grouped_glu_mlp.reference import random_inputs
from tilefuse.ops.grouped_glu_mlp.tune import DEFAULT_SHAPES

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "2026-12-04-h200-ad"))
from run1_host import p50_us  # noqa: E402

SHIPPED = (streams.on_side, streams.join)
_LOCAL = threading.local()


def _events():
    ev = getattr(_LOCAL, "events", None)
    if ev is None:
        ev = _LOCAL.events = (torch.cuda.Event(), torch.cuda.Event())
    return ev


def on_side_reused(side, device, fn):
    if side is None:
        return fn()
    fork, _ = _events()
    fork.record(torch.cuda.current_stream(device))
    side.wait_event(fork)
    with torch.cuda.stream(side):
        return fn()


def on_side_set_stream(side, device, fn):
    if side is None:
        return fn()
    fork, _ = _events()
    caller = torch.cuda.current_stream(device)
    fork.record(caller)
    side.wait_event(fork)
    torch.cuda.set_stream(side)
    try:
        return fn()
    finally:
        torch.cuda.set_stream(caller)


def join_reused(side, device):
    if side is not None:
        _, back = _events()
        back.record(side)
        torch.cuda.current_stream(device).wait_event(back)


VARIANTS = {"shipped": SHIPPED, "reused events": (on_side_reused, join_reused),
            "reused events, set_stream": (on_side_set_stream, join_reused)}


def with_variant(name, fn):
    def call():
        if name == "one stream":
            streams.BESIDE = False
        else:
            streams.on_side, streams.join = VARIANTS[name]
        try:
            return fn()
        finally:
            streams.BESIDE = True
            streams.on_side, streams.join = SHIPPED
    return call


def main():
    print(torch.__version__, torch.cuda.get_device_name(), "level", tilefuse.policy.get_level())
    names = ["one stream", *VARIANTS]
    print("| shape | " + " | ".join(f"{n} us" for n in names) + " | bits as shipped |")
    print("|---" * (len(names) + 2) + "|")
    for index, (E, T, H, Fd) in enumerate(DEFAULT_SHAPES, 1):
        i = random_inputs([T // E] * E, H, Fd, torch.bfloat16, bias=False, device="cuda",
                          generator=torch.Generator().manual_seed(index))
        c, dy = i["counts"], i["dy"]
        leaves = [i[k].detach().requires_grad_() for k in ("x", "probs", "w1", "w2")]

        def step():
            out = tilefuse.grouped_glu_mlp(leaves[0], c, *leaves[1:], glu_interleave=32)
            return (out, *torch.autograd.grad(out, leaves, dy))
        calls = {n: with_variant(n, step) for n in names}
        want = calls["shipped"]()
        same = all(all(torch.equal(a, b) for a, b in zip(want, calls[n]())) for n in VARIANTS)
        del want
        m = p50_us(calls)
        print(f"| {index} | " + " | ".join(f"{m[n]:.1f}" for n in names) + f" | {same} |", flush=True)
        del i, leaves
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
