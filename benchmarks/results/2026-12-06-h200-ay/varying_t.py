"""Host time of grouped_glu_mlp forward + backward calls whose token count T changes every
call (dropless routing, expert parallelism), against calls that repeat one T: plans on with
compiled kernels shared across launchers (triton_common._shared_entries, 3d86d5c), plans on
with that sharing off (triton_common._shared_get finding nothing: each new plan's launchers go
through Triton's JIT on their first launch, as on the tree before 3d86d5c), and plans off (ENABLED False). bf16, E 8, H 1024,
F 512, interleave 32; T drawn from 4096 + 16 k (distinct, multiples of 16). Each mode runs
N calls, timed by perf_counter around the calls with one synchronize at the end (the GPU work
of these calls is shorter than their host time), median of 3 interleaved rounds.

    PYTHONPATH=src python3 benchmarks/results/2026-12-06-h200-ay/varying_t.py [--calls 200]
"""
import argparse
import statistics
import time

import torch

import tilefuse
from tilefuse.ops import triton_common
from tilefuse.ops.grouped_glu_mlp import plan as plans
from tilefuse.ops.grouped_glu_mlp.reference import random_inputs

E, H, F = 8, 1024, 512
SHARED_GET = triton_common._shared_get


def make(T, seed):
    counts = [T // E] * E
    counts[0] += T - sum(counts)
    i = random_inputs(counts, H, F, torch.bfloat16, bias=False, device="cuda",
                      generator=torch.Generator().manual_seed(seed))
    leaves = [i[k].detach().requires_grad_(True) for k in ("x", "probs", "w1", "w2")]
    return leaves, i["counts"], i["dy"]


def step(leaves, counts, dy):
    y = tilefuse.grouped_glu_mlp(leaves[0], counts, leaves[1], leaves[2], leaves[3], glu_interleave=32)
    torch.autograd.grad(y, leaves, dy)


def run(mode, ts, inputs):
    plans.ENABLED = mode != "plans off"
    triton_common._shared_get = (lambda key: None) if mode == "plans on, no sharing" else SHARED_GET
    triton_common._shared_entries.clear()
    plans.clear()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for T in ts:
        step(*inputs[T])
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / len(ts) * 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=200)
    args = ap.parse_args()
    varying = [4096 + 16 * k for k in range(args.calls)]
    same = [4096] * args.calls
    inputs = {T: make(T, T) for T in varying}
    for T in varying[:2]:            # every kernel compiled once (Triton's disk and memory caches)
        step(*inputs[T])
    modes = ["plans on (shared)", "plans on, no sharing", "plans off"]
    cases = [(m, name, ts) for m in modes for name, ts in (("new T each call", varying), ("one T", same))]
    got = {(m, n): [] for m, n, _ in cases}
    for r in range(3):
        for m, n, ts in cases[r % len(cases):] + cases[:r % len(cases)]:
            got[(m, n)].append(run(m, ts, inputs))
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}; {args.calls} calls a mode, median of 3 rounds")
    print("| mode | T | us per fwd+bwd call |")
    print("|---|---|---|")
    for (m, n), v in got.items():
        print(f"| {m} | {n} | {statistics.median(v):.1f} |")


if __name__ == "__main__":
    main()
