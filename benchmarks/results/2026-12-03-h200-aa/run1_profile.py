"""Run 1: grouped_glu_mlp forward + backward as users call it (tilefuse.grouped_glu_mlp,
interleave 32, balanced counts, the built-in table), bf16 and fp8_block, every kernel of one
step in launch order with its device time (torch.profiler, the last of 3 profiled steps),
and the sums by kind.

    PYTHONPATH=src python3 benchmarks/results/2026-12-03-h200-aa/run1_profile.py [--shapes 1,2,3]
"""
import argparse
import collections

import torch
from torch.profiler import ProfilerActivity, profile

import tilefuse
from tilefuse.ops.grouped_glu_mlp.reference import random_inputs
from tilefuse.ops.grouped_glu_mlp.tune import DEFAULT_SHAPES

SHAPES = dict(enumerate(DEFAULT_SHAPES, start=1))


def kind(name: str) -> str:
    n = name.lower()
    for key, label in (("fp8_ws", "gemm (ws)"), ("grouped_gemm", "gemm (triton)"), ("wgrad", "wgrad"),
                       ("quant", "quantizer"), ("cutlass", "gemm (cutlass)"), ("gemm", "gemm (other)"),
                       ("glu", "glue"), ("colsum", "glue")):
        if key in n:
            return label
    return "other"


def step_fn(i, leaves, recipe):
    def step():
        y = tilefuse.grouped_glu_mlp(leaves["x"], i["counts"], leaves["probs"], leaves["w1"], leaves["w2"],
                                     activation="swiglu", glu_interleave=32, recipe=recipe)
        return torch.autograd.grad(y, list(leaves.values()), i["dy"])
    return step


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="1,2,3")
    args = ap.parse_args()
    for s in [int(v) for v in args.shapes.split(",")]:
        E, T, H, F = SHAPES[s]
        i = random_inputs([T // E] * E, H, F, torch.bfloat16, bias=False, device="cuda",
                          generator=torch.Generator().manual_seed(s))
        leaves = {k: i[k].detach().requires_grad_(True) for k in ("x", "probs", "w1", "w2")}
        for recipe in (None, "fp8_block"):
            step = step_fn(i, leaves, recipe)
            for _ in range(3):
                step()
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(3):
                    step()
                torch.cuda.synchronize()
            evts = sorted([e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA],
                          key=lambda e: e.time_range.start)
            n = len(evts) // 3
            last = evts[2 * n:]
            total = sum(e.time_range.elapsed_us() for e in last)
            print(f"\nshape {s} (E {E} T {T} H {H} F {F}) recipe {recipe or 'bf16'}: {len(last)} kernels, "
                  f"{total / 1e3:.3f} ms of kernel time in a step")
            sums = collections.Counter()
            for e in last:
                us = e.time_range.elapsed_us()
                sums[kind(e.name)] += us
                print(f"  {us / 1e3:7.3f} ms  {e.name[:100]}")
            print("  by kind: " + ", ".join(f"{k} {v / 1e3:.3f}" for k, v in sums.most_common()))
        del i, leaves
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
