"""Run 5: host time per call of grouped_glu_mlp as users call it against the compositions it
replaces, the spec's measurement (warm, synchronise before each call, time only the call, p50
over 300 calls), interleaved: 3 rounds of 100 calls of each provider in turn, the p50 over a
provider's 300 samples. Providers:
- tilefuse: ``tilefuse.grouped_glu_mlp`` (the built-in table's route);
- composition + check: reference.grouped_glu_mlp_unfused, what ``tilefuse check`` compares
  against (torch._grouped_mm, the GLU as torch ops, the counts checked on the device);
- bare composition: what a user writes without tilefuse (cumsum of the counts, two
  torch._grouped_mm and the GLU as torch ops; no check of the counts).
Forward on inputs without grad at the spec's three shapes, and forward + backward (autograd.grad
of x, probs, w1, w2) at shape 3. bf16, SwiGLU, no bias, balanced counts, interleave 32 and None.

    PYTHONPATH=src python3 benchmarks/results/2026-12-03-h200-ac/run5_host.py
"""
import statistics
import time

import torch
import torch.nn.functional as F

import tilefuse
from tilefuse.ops.grouped_glu_mlp.reference import grouped_glu_mlp_unfused, random_inputs, split_glu
from tilefuse.ops.grouped_glu_mlp.tune import DEFAULT_SHAPES

ROUNDS, CALLS = 3, 100


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


def bare(x, counts, p, w1, w2, inter):
    ends = torch.cumsum(counts, 0, dtype=torch.int32)
    z = torch._grouped_mm(x, w1.transpose(-2, -1), offs=ends)
    gate, up = split_glu(z, inter)
    a = F.silu(gate.float()) * up.float()
    if inter:
        a = a.flatten(-2)
    h = (a * p[:, None]).to(x.dtype)
    return torch._grouped_mm(h, w2.transpose(-2, -1), offs=ends)


def main():
    print(torch.__version__, torch.cuda.get_device_name(), "level", tilefuse.policy.get_level())
    print("| shape | interleave | pass | tilefuse us | composition + check us | ratio | bare composition us | ratio |")
    print("|---|---|---|---|---|---|---|---|")
    for index, (E, T, H, Fd) in enumerate(DEFAULT_SHAPES, 1):
        i = random_inputs([T // E] * E, H, Fd, torch.bfloat16, bias=False, device="cuda",
                          generator=torch.Generator().manual_seed(index))
        c = i["counts"]
        leaves = [i[k].detach().requires_grad_() for k in ("x", "probs", "w1", "w2")]
        detached = [t.detach() for t in leaves]
        dy = torch.randn(T, H, dtype=torch.bfloat16, device="cuda")
        for inter in (32, None):
            fns = {"tilefuse": lambda x, p, w1, w2: tilefuse.grouped_glu_mlp(x, c, p, w1, w2, glu_interleave=inter),
                   "check": lambda x, p, w1, w2: grouped_glu_mlp_unfused(x, c, p, w1, w2, glu_interleave=inter),
                   "bare": lambda x, p, w1, w2: bare(x, c, p, w1, w2, inter)}
            ref = fns["check"](*detached)
            for name in ("tilefuse", "bare"):
                err = (fns[name](*detached).float() - ref.float()).norm() / ref.float().norm()
                assert err < 1e-2, (name, float(err))
            for pass_ in ("fwd", "fwd+bwd") if index == 3 else ("fwd",):
                calls = {n: ((lambda f=f: f(*detached)) if pass_ == "fwd" else
                             (lambda f=f: torch.autograd.grad(f(*leaves), leaves, dy))) for n, f in fns.items()}
                for call in calls.values():
                    for _ in range(5):
                        call()
                got = {n: [] for n in fns}
                for _ in range(ROUNDS):
                    for n, call in calls.items():
                        got[n] += samples(call, CALLS)
                m = {n: statistics.median(v) * 1e6 for n, v in got.items()}
                print(f"| {index} | {inter} | {pass_} | {m['tilefuse']:.1f} | {m['check']:.1f} "
                      f"| {m['tilefuse'] / m['check']:.2f} | {m['bare']:.1f} | {m['tilefuse'] / m['bare']:.2f} |",
                      flush=True)
        del i, leaves, detached
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
