"""Run 13: in a steady eager loop, where does fp8_block's step lose time to its GPU's idling?

Run 7 timed fp8_block with its weights reused at 3.40 ms a step eagerly against 3.02 ms of
kernels (shape 2, H100) while run 9 put its host at 2.72 ms a step: the host is ahead on
average, so the GPU should not idle unless something holds the host back inside a step (a
device synchronisation in the allocator, cudaMalloc / cudaFree, a blocking copy). Here each
provider runs 20 steps back to back (a sync only before and after): the wall time a step, the
kernels' busy time a step (torch.profiler over a second pass of 20 steps: the union of their
intervals), the GPU's gaps longer than 50 us, and the caching allocator's counters over the 20
steps (device allocations made and freed, retries after an out-of-memory). bf16, fp8_block,
fp8_block with its weights reused; shapes 2 and 3.

    PYTHONPATH=src python3 benchmarks/results/2026-12-07-h200-bf/run13_steady.py [--shapes 2,3] [--steps 20]
"""

from __future__ import annotations

import argparse
import contextvars
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
from grouped_compose_gpu_check import SHAPES, fp8_fn, leaves_of, tilefuse_fn  # noqa: E402

import tilefuse  # noqa: E402
from tilefuse.ops.grouped_glu_mlp.reference import random_inputs  # noqa: E402


def counters():
    s = torch.cuda.memory_stats()
    return {k: s.get(k, 0) for k in ("num_alloc_retries", "num_device_alloc", "num_device_free", "num_sync_all_streams")}


def steady(step, n):
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    before = counters()
    t0 = time.perf_counter()
    for _ in range(n):
        step()
    torch.cuda.synchronize()
    wall = (time.perf_counter() - t0) / n
    after = counters()
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(n):
            step()
        torch.cuda.synchronize()
    ks = sorted((e.start_ns() / 1e3, e.duration_ns() / 1e3) for e in prof.profiler.kineto_results.events()
                if e.device_type() == torch.autograd.DeviceType.CUDA)
    busy, end, gaps = 0.0, ks[0][0], []
    for s, d in ks:
        if s > end + 50:
            gaps.append(s - end)
        if s + d > end:
            busy += s + d - max(s, end)
            end = s + d
    span = (end - ks[0][0]) / n
    return wall * 1e3, busy / n / 1e3, span / 1e3, gaps, {k: after[k] - before[k] for k in after}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="2,3")
    ap.add_argument("--steps", type=int, default=20)
    args = ap.parse_args()
    print(torch.__version__, torch.cuda.get_device_name(), flush=True)
    for s in (int(v) for v in args.shapes.split(",")):
        E, T, H, F = SHAPES[s]
        i = random_inputs([T // E] * E, H, F, torch.bfloat16, bias=False, device="cuda",
                          generator=torch.Generator().manual_seed(0))
        leaves = leaves_of(i)
        bf16, fp8 = tilefuse_fn("swiglu"), fp8_fn("swiglu")

        def run(fn):
            y = fn(leaves["x"], i["counts"], leaves["probs"], leaves["w1"], leaves["w2"], 32)
            return torch.autograd.grad(y, list(leaves.values()), i["dy"])

        reuse = contextvars.copy_context()
        block = tilefuse.reuse_quantized_weights()
        reuse.run(block.__enter__)
        cases = {"bf16": lambda: run(bf16), "fp8_block": lambda: run(fp8),
                 "fp8_block, weights reused": lambda: reuse.run(run, fp8)}
        print(f"\nshape {s} (E {E} T {T} H {H} F {F}), {args.steps} steps back to back:", flush=True)
        for name, case in cases.items():
            wall, busy, span, gaps, c = steady(case, args.steps)
            big = sorted(gaps, reverse=True)[:6]
            print(f"  {name:26s} wall {wall:6.3f} ms/step  busy {busy:6.3f}  span {span:6.3f}  "
                  f"gaps>50us {len(gaps) / args.steps:4.1f}/step sum {sum(gaps) / args.steps / 1e3:6.3f} ms/step "
                  f"largest {[round(g) for g in big]} us  allocator {c}", flush=True)
        reuse.run(block.__exit__, None, None, None)
        del leaves, i
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
