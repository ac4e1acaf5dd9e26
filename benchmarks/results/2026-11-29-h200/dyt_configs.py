"""Explore DyT launch configs on a GPU: per width and dtype, time a set of candidate configs
(interleaved, CUDA events, medians) against the heuristic default and print the best.

    PYTHONPATH=src python benchmarks/results/2026-11-29-h200/dyt_configs.py [--widths 16,128,1024,8192] [--numel-log2 26]

(The exploration behind dyt_configs.txt here, moved from benchmarks/; the standing way is
``tilefuse tune --op dyt --shape ROWSxCOLS --dry-run``, which prints every timed candidate.)

Used to set configs.heuristic from measurements; the tuner (tilefuse tune) does the same
per key with correctness checks and margins.
"""

import argparse
import itertools

import torch

from tilefuse.check import bench
from tilefuse.ops.dyt import configs, launch
from tilefuse.ops.dyt.configs import DyTConfig


def space(problem):
    out = []
    if problem.pass_ == "fwd":
        tiles, warps, pps = (1024, 2048, 4096), (2, 4, 8), (4,)
    else:
        tiles, warps, pps = (2048, 4096), (4, 8, 16), (1, 2, 4)
    for tile, w, p in itertools.product(tiles, warps, pps):
        bn = min(configs.next_power_of_2(problem.n_cols), tile)
        c = DyTConfig(max(1, tile // bn), bn, w, p)
        if configs.keep(problem, c) and c not in out:
            out.append(c)
    h = configs.heuristic(problem)
    return [h] + [c for c in out if c != h]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--widths", default="16,32,64,128,256,512,1024,2048,4096,8192")
    ap.add_argument("--numel-log2", type=int, default=26)
    ap.add_argument("--dtypes", default="fp32,bf16")
    ap.add_argument("--passes", default="fwd,bwd")
    args = ap.parse_args()
    numel = 2 ** args.numel_log2
    dts = {"fp32": torch.float32, "bf16": torch.bfloat16}
    print("| dtype | width | pass | heuristic | ms | best | ms | best/heuristic | GB/s best |")
    print("|---|---|---|---|---|---|---|---|---|")
    for dname in args.dtypes.split(","):
        dtype = dts[dname]
        for width in map(int, args.widths.split(",")):
            rows = numel // width
            x = torch.randn(rows, width, device="cuda").to(dtype)
            dy = torch.randn_like(x)
            a = torch.tensor([0.5], device="cuda")
            w = torch.randn(width, device="cuda")
            b = torch.randn(width, device="cuda")
            y = torch.empty_like(x)
            for pass_ in args.passes.split(","):
                problem = launch.problem_for(x, True, pass_)
                cands = space(problem)
                if pass_ == "fwd":
                    fns = {c: (lambda c=c: launch.forward(x, a, w, b, True, config=c, out=y)) for c in cands}
                    nbytes = 2 * numel * x.element_size()
                else:
                    fns = {c: (lambda c=c: launch.backward(dy, x, a, w, b, True, config=c, dx_out=y)) for c in cands}
                    nbytes = 3 * numel * x.element_size()
                res = bench.interleaved(fns, rounds=3, target_ms=5)
                ok = {c: t for c, t in res.items() if isinstance(t, bench.Timing)}
                h = cands[0]
                best = min(ok, key=lambda c: ok[c].median_ms)
                print(f"| {dname} | {width} | {pass_} | {h.name} | {ok[h].median_ms:.4f} | {best.name} | "
                      f"{ok[best].median_ms:.4f} | {ok[best].median_ms / ok[h].median_ms:.3f} | "
                      f"{nbytes / ok[best].median_ms / 1e6:.0f} |", flush=True)
                top = sorted(ok, key=lambda c: ok[c].median_ms)[:4]
                print("    top: " + ", ".join(f"{c.name} {ok[c].median_ms:.4f}" for c in top)
                      + f"; failed {len(res) - len(ok)}", flush=True)


if __name__ == "__main__":
    main()
