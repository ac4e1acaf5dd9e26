"""Run 1: host time per call of grouped_glu_mlp as users call it, forward and forward +
backward, against the compositions it replaces and against itself with the backward
unplanned (compose.ForwardPlan.backward replaced by compose.backward: the tree before the
backward plans), the spec's measurement (warm, synchronise before each call, time only the
call, p50), interleaved: 3 rounds of 100 calls of each provider in turn. Providers:
- tilefuse: ``tilefuse.grouped_glu_mlp`` (the built-in table's route, call plans on);
- tilefuse, backward unplanned (fwd+bwd only);
- composition + check: reference.grouped_glu_mlp_unfused (what ``tilefuse check`` times);
- bare composition: cumsum of the counts, two torch._grouped_mm and the GLU as torch ops.
The spec's three shapes, bf16, SwiGLU, no bias, balanced counts, interleave 32 and None;
forward + backward is autograd.grad of x, probs, w1, w2 with a contiguous dy.

    PYTHONPATH=src python3 benchmarks/results/2026-12-04-h200-ad/run1_host.py
"""
import statistics
import time

import torch
import torch.nn.functional as F

import tilefuse
from tilefuse.ops.grouped_glu_mlp import compose
from tilefuse.ops.grouped_glu_mlp.reference import grouped_glu_mlp_unfused, random_inputs, split_glu
from tilefuse.ops.grouped_glu_mlp.tune import DEFAULT_SHAPES

ROUNDS, CALLS = 3, 100
PLANNED_BACKWARD = compose.ForwardPlan.backward


def unplanned_backward(self, *args, **kwargs):
    return compose.backward(*args, glue=self.glue, **kwargs)


def samples(fn, n):
    """Host seconds of n calls of fn, each after a synchronisation (fn warmed by the caller)."""
    out = []
    for _ in range(n):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    torch.cuda.synchronize()
    return out


def p50_us(calls: dict) -> dict:
    """Host microseconds per call (p50) of each of ``calls`` (name: zero-argument callable), the
    spec's measurement: 5 warm-up calls each, then ROUNDS interleaved rounds of CALLS calls of
    each in turn (``samples``). For later runs' scripts; run 1's own loop is inline."""
    for call in calls.values():
        for _ in range(5):
            call()
    got = {n: [] for n in calls}
    for _ in range(ROUNDS):
        for n, call in calls.items():
            got[n] += samples(call, CALLS)
    return {n: statistics.median(v) * 1e6 for n, v in got.items()}


def bare(x, counts, p, w1, w2, inter):
    ends = torch.cumsum(counts, 0, dtype=torch.int32)
    z = torch._grouped_mm(x, w1.transpose(-2, -1), offs=ends)
    gate, up = split_glu(z, inter)
    a = F.silu(gate.float()) * up.float()
    if inter:
        a = a.flatten(-2)
    h = (a * p[:, None]).to(x.dtype)
    return torch._grouped_mm(h, w2.transpose(-2, -1), offs=ends)


def with_backward(planned):
    def call(fn):
        compose.ForwardPlan.backward = PLANNED_BACKWARD if planned else unplanned_backward
        try:
            return fn()
        finally:
            compose.ForwardPlan.backward = PLANNED_BACKWARD
    return call


def main():
    print(torch.__version__, torch.cuda.get_device_name(), "level", tilefuse.policy.get_level())
    print("| shape | interleave | pass | tilefuse us | tilefuse, backward unplanned us | composition + check us "
          "| bare composition us | tilefuse / bare |")
    print("|---|---|---|---|---|---|---|---|")
    for index, (E, T, H, Fd) in enumerate(DEFAULT_SHAPES, 1):
        i = random_inputs([T // E] * E, H, Fd, torch.bfloat16, bias=False, device="cuda",
                          generator=torch.Generator().manual_seed(index))
        c = i["counts"]
        leaves = [i[k].detach().requires_grad_() for k in ("x", "probs", "w1", "w2")]
        detached = [t.detach() for t in leaves]
        dy = torch.randn(T, H, dtype=torch.bfloat16, device="cuda")
        for inter in (32, None):
            tf = lambda x, p, w1, w2: tilefuse.grouped_glu_mlp(x, c, p, w1, w2, glu_interleave=inter)  # noqa: E731
            fns = {"tilefuse": tf, "unplanned": tf,
                   "check": lambda x, p, w1, w2: grouped_glu_mlp_unfused(x, c, p, w1, w2, glu_interleave=inter),
                   "bare": lambda x, p, w1, w2: bare(x, c, p, w1, w2, inter)}
            ref = fns["check"](*detached)
            err = (tf(*detached).float() - ref.float()).norm() / ref.float().norm()
            assert err < 1e-2, float(err)
            g_ref = torch.autograd.grad(fns["check"](*leaves), leaves, dy)
            for planned in (True, False):
                got = with_backward(planned)(lambda: torch.autograd.grad(tf(*leaves), leaves, dy))
                for gg, gr in zip(got, g_ref):
                    e = (gg.float() - gr.float()).norm() / gr.float().norm()
                    assert e < 2e-2, (planned, float(e))
            for pass_ in ("fwd", "fwd+bwd"):
                calls = {}
                for n, f in fns.items():
                    if pass_ == "fwd":
                        if n == "unplanned":
                            continue
                        calls[n] = lambda f=f: f(*detached)
                    else:
                        wrap = with_backward(n != "unplanned")
                        calls[n] = lambda f=f, wrap=wrap: wrap(lambda: torch.autograd.grad(f(*leaves), leaves, dy))
                for call in calls.values():
                    for _ in range(5):
                        call()
                got = {n: [] for n in calls}
                for _ in range(ROUNDS):
                    for n, call in calls.items():
                        got[n] += samples(call, CALLS)
                m = {n: statistics.median(v) * 1e6 for n, v in got.items()}
                un = f"{m['unplanned']:.1f}" if "unplanned" in m else "-"
                print(f"| {index} | {inter} | {pass_} | {m['tilefuse']:.1f} | {un} | {m['check']:.1f} "
                      f"| {m['bare']:.1f} | {m['tilefuse'] / m['bare']:.2f} |", flush=True)
        del i, leaves, detached
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
