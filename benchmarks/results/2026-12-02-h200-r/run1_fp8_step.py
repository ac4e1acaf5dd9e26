"""Where does fp8_block's whole step go? torch.profiler's kernel table of one forward + backward
of ``tilefuse.grouped_glu_mlp`` as users call it (autograd, recipe="fp8_block"), beside the bf16
op (recipe None), at the spec's three shapes; plus the step's own time (CUDA events, median) so
the gap between the sum of kernels and the step (GPU idle: host-side work) shows.

2026-12-02-h200-o run 2 timed each fp8_block role alone; their sum was 1.0-1.4 ms (shape 1) and
0.7-0.8 ms (shape 2) under the whole step's time. This run says what fills that gap.

    PYTHONPATH=src python3 benchmarks/results/2026-12-02-h200-r/run1_fp8_step.py [--shapes 1,2,3]
"""
import argparse
import collections
import re
import statistics

import torch

import tilefuse
from tilefuse.ops.grouped_glu_mlp.reference import random_inputs
from tilefuse.ops.grouped_glu_mlp.tune import DEFAULT_SHAPES

SHAPES = dict(enumerate(DEFAULT_SHAPES, start=1))


def inputs(E, T, H, F):
    i = random_inputs([T // E] * E, H, F, torch.bfloat16, bias=False, device="cuda")
    for k in ("x", "probs", "w1", "w2"):
        i[k].requires_grad_(True)
    return i


def step(i, recipe):
    for k in ("x", "probs", "w1", "w2"):
        i[k].grad = None
    y = tilefuse.grouped_glu_mlp(i["x"], i["counts"], i["probs"], i["w1"], i["w2"], recipe=recipe)
    y.backward(i["dy"])


def step_ms(i, recipe, n=10):
    times = []
    for _ in range(n):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        a.record()
        step(i, recipe)
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def short(name):
    name = re.sub(r"<.*", "", name)
    name = re.sub(r"\(.*", "", name)
    return name[:70]


def kernel_table(i, recipe, steps=3):
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            step(i, recipe)
        torch.cuda.synchronize()
    total, count = collections.Counter(), collections.Counter()
    for ev in prof.events():
        if ev.device_type == torch.autograd.DeviceType.CUDA:
            key = short(ev.name)
            total[key] += ev.device_time_total / 1e3 / steps if hasattr(ev, "device_time_total") else ev.cuda_time_total / 1e3 / steps
            count[key] += 1
    return total, {k: v / steps for k, v in count.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="1,2,3")
    args = ap.parse_args()
    import triton
    print(f"torch {torch.__version__}, triton {triton.__version__}, {torch.cuda.get_device_name()}")
    for s in (int(v) for v in args.shapes.split(",")):
        E, T, H, F = SHAPES[s]
        i = inputs(E, T, H, F)
        flop = 3 * 2 * T * H * 3 * F
        for recipe in (None, "fp8_block"):
            for _ in range(3):
                step(i, recipe)
        # interleaved step times
        t = {None: [], "fp8_block": []}
        for _ in range(3):
            for recipe in (None, "fp8_block"):
                t[recipe].append(step_ms(i, recipe))
        for recipe in (None, "fp8_block"):
            ms = statistics.median(t[recipe])
            total, count = kernel_table(i, recipe)
            ksum = sum(total.values())
            print(f"\n## shape {s} {(E, T, H, F)} recipe {recipe}: step {ms:.3f} ms ({flop / ms / 1e9:.0f} TFLOP/s), "
                  f"sum of kernels {ksum:.3f} ms, rounds {[round(v, 3) for v in t[recipe]]}")
            for name, v in total.most_common(24):
                print(f"  {v:8.3f} ms  x{count[name]:4.1f}  {name}")
        del i
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
