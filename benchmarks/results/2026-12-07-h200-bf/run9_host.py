"""Run 9: what one grouped_glu_mlp step costs the host, bf16 and fp8_block (and fp8_block with its
weights reused), at the spec's shapes 2-3 (interleave 32, the built-in table, balanced counts).

Run 7's timelines show fp8_block's GPU idle between launches (eager 4.04 ms against 3.78 ms of
kernels at shape 2 on an H100, and 3.40 against 3.02 with the weights reused), where bf16's
GPU stays ahead of its host. Here the GPU is kept busy by torch.cuda._sleep before each call,
so the host never waits for it: the wall time of the forward call and of the backward
(torch.autograd.grad) is the host's alone (a host sync in either would show as the sleep's ~20
ms). Medians of 30 calls each. Then cProfile of 30 fp8_block steps under the same sleep: the
functions with the most own time and the most cumulative time.

    PYTHONPATH=src python3 benchmarks/results/2026-12-07-h200-bf/run9_host.py [--shapes 2,3]
"""

from __future__ import annotations

import argparse
import contextvars
import cProfile
import os
import pstats
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
from grouped_compose_gpu_check import SHAPES, fp8_fn, leaves_of, tilefuse_fn  # noqa: E402

import tilefuse  # noqa: E402
from tilefuse.ops.grouped_glu_mlp.reference import random_inputs  # noqa: E402

SLEEP = int(4e7)   # cycles: ~20 ms at the H100's / H200's clocks


def split_call(fn, i, leaves):
    """(host us of the forward call, of torch.autograd.grad) with the GPU busy before both."""
    torch.cuda.synchronize()
    torch.cuda._sleep(SLEEP)
    t0 = time.perf_counter()
    y = fn(leaves["x"], i["counts"], leaves["probs"], leaves["w1"], leaves["w2"], 32)
    t1 = time.perf_counter()
    torch.autograd.grad(y, list(leaves.values()), i["dy"])
    t2 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) * 1e6, (t2 - t1) * 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="2,3")
    ap.add_argument("--calls", type=int, default=30)
    args = ap.parse_args()
    print(torch.__version__, torch.cuda.get_device_name(), flush=True)
    for s in (int(v) for v in args.shapes.split(",")):
        E, T, H, F = SHAPES[s]
        i = random_inputs([T // E] * E, H, F, torch.bfloat16, bias=False, device="cuda",
                          generator=torch.Generator().manual_seed(0))
        leaves = leaves_of(i)
        reuse = contextvars.copy_context()
        block = tilefuse.reuse_quantized_weights()
        reuse.run(block.__enter__)
        bf16, fp8 = tilefuse_fn("swiglu"), fp8_fn("swiglu")
        cases = {"bf16": lambda: split_call(bf16, i, leaves), "fp8_block": lambda: split_call(fp8, i, leaves),
                 "fp8_block, weights reused": lambda: reuse.run(split_call, fp8, i, leaves)}
        for case in cases.values():   # warm-up: compiles, tables, plans
            case()
            case()
        samples = {name: [] for name in cases}
        for _ in range(args.calls):
            for name, case in cases.items():   # interleaved
                samples[name].append(case())
        print(f"\nshape {s} (E {E} T {T} H {H} F {F}): host us per call, median of {args.calls}", flush=True)
        for name, got in samples.items():
            fwd = statistics.median(f for f, _ in got)
            bwd = statistics.median(b for _, b in got)
            print(f"  {name:28s} forward {fwd:8.1f}  backward {bwd:8.1f}  step {fwd + bwd:8.1f}"
                  f"  (max step {max(f + b for f, b in got):8.1f})", flush=True)
        prof = cProfile.Profile()
        for _ in range(args.calls):
            torch.cuda.synchronize()
            torch.cuda._sleep(SLEEP)
            prof.enable()
            y = fp8(leaves["x"], i["counts"], leaves["probs"], leaves["w1"], leaves["w2"], 32)
            torch.autograd.grad(y, list(leaves.values()), i["dy"])
            prof.disable()
        torch.cuda.synchronize()
        st = pstats.Stats(prof)
        st.sort_stats("tottime").print_stats(25)
        st.sort_stats("cumulative").print_stats(45)
        reuse.run(block.__exit__, None, None, None)
        del leaves, i
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
