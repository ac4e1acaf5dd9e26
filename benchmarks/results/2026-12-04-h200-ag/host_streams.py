"""Issue 16 (GPU; prepared): what the second stream costs the host. Host microseconds per
forward + backward call of ``tilefuse.grouped_glu_mlp`` as users call it, with the second
stream (ops/grouped_glu_mlp/streams.py: two forks and a join a backward) and without
(streams.BESIDE off), beside the bare composition (cumsum, two torch._grouped_mm and the GLU as
torch ops, under autograd): the spec's measurement (warm, synchronise before each call, time
only the call, p50), interleaved, 3 rounds of 100 calls each. The spec's three shapes, bf16,
SwiGLU, interleave 32, balanced counts; gradients of x, probs, w1 and w2 with a contiguous dy.

    PYTHONPATH=src python3 benchmarks/results/2026-12-04-h200-ag/host_streams.py
"""
import statistics
import sys
from pathlib import Path

import torch

import tilefuse
from tilefuse.ops.grouped_glu_mlp import streams
from tilefuse.ops.grouped_glu_mlp.reference import random_inputs
from tilefuse.ops.grouped_glu_mlp.tune import DEFAULT_SHAPES

# The spec's per-call host timing and the bare composition, as 2026-12-04-h200-ad run 1 timed them.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "2026-12-04-h200-ad"))
from run1_host import CALLS, ROUNDS, bare, samples  # noqa: E402


def beside(on, fn):
    def call():
        streams.BESIDE = on
        try:
            return fn()
        finally:
            streams.BESIDE = True
    return call


def main():
    print(torch.__version__, torch.cuda.get_device_name(), "level", tilefuse.policy.get_level())
    print("| shape | tilefuse, two streams us | tilefuse, one stream us | bare composition us | two / one | two / bare |")
    print("|---|---|---|---|---|---|")
    for index, (E, T, H, Fd) in enumerate(DEFAULT_SHAPES, 1):
        i = random_inputs([T // E] * E, H, Fd, torch.bfloat16, bias=False, device="cuda",
                          generator=torch.Generator().manual_seed(index))
        c, dy = i["counts"], i["dy"]
        leaves = [i[k].detach().requires_grad_() for k in ("x", "probs", "w1", "w2")]

        def step(f):
            return lambda: torch.autograd.grad(f(*leaves), leaves, dy)
        tf = step(lambda x, p, w1, w2: tilefuse.grouped_glu_mlp(x, c, p, w1, w2, glu_interleave=32))
        calls = {"two": beside(True, tf), "one": beside(False, tf),
                 "bare": step(lambda x, p, w1, w2: bare(x, c, p, w1, w2, 32))}
        for call in calls.values():
            for _ in range(5):
                call()
        got = {n: [] for n in calls}
        for _ in range(ROUNDS):
            for n, call in calls.items():
                got[n] += samples(call, CALLS)
        m = {n: statistics.median(v) * 1e6 for n, v in got.items()}
        print(f"| {index} | {m['two']:.1f} | {m['one']:.1f} | {m['bare']:.1f} | {m['two'] / m['one']:.3f} "
              f"| {m['two'] / m['bare']:.2f} |", flush=True)
        del i, leaves
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
