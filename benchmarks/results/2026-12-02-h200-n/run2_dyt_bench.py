"""Run 2: tilefuse.dyt alone at 2**26 elements, the spec's ten widths, fp32 and bf16 x (fp32
parameters, bias), forward and forward + backward under CUDA-graph replay, as shares of the
device-to-device copy ceiling measured in the same process (the same measurement as `tilefuse
bench --ops dyt`'s tilefuse rows: check.dyt.benchmark, without the peers, which this run does
not need).

    PYTHONPATH=src python3 benchmarks/results/2026-12-02-h200-n/run2_dyt_bench.py [--dtypes bf16]
(a copy of results/2026-12-01-h200-k/run2_dyt_bench.py, so that this folder holds what ran)
"""
import argparse
import json

import torch

from tilefuse import tuning
from tilefuse.check import bench
from tilefuse.check.dyt import DTYPES, WIDTHS, _inputs, _providers
from tilefuse.ops.dyt import launch
from tilefuse.tuning import timing

parser = argparse.ArgumentParser()
parser.add_argument("--dtypes", default="fp32,bf16")
parser.add_argument("--json")
args = parser.parse_args()
numel = 2 ** 26
out = []
print("| dtype | width | fwd us | fwd of copy | fwd+bwd us | fwd+bwd of copy | configs fwd / bwd |")
print("|---|---|---|---|---|---|---|")
for dname in args.dtypes.split(","):
    dtype = DTYPES[dname]
    ceiling = bench.copy_ceiling_gbs(numel, dtype)
    for width in WIDTHS:
        x, a, w, b, dy = _inputs((numel // width, width), dtype, torch.float32, True, True, "cuda")
        cfg = {p: launch.pick_config(launch.problem_for(x, True, p)) for p in ("fwd", "bwd")}
        row = {"dtype": dname, "width": width, "copy_gbs": ceiling,
               "configs": {p: c.name + ("" if tuning.is_covered("dyt", launch.problem_for(x, True, p)) else " (untuned)")
                           for p, c in cfg.items()}}
        for pass_name, with_bwd, nbytes in (("fwd", False, 2), ("fwd+bwd", True, 5)):
            # check.dyt's provider for tilefuse (its forward, or forward + autograd backward);
            # the torch.compile peer it also builds is never called, so a stand-in function
            fn = _providers(x, a, w, b, dy, with_bwd, lambda *t: None)["tilefuse"]
            t = timing.interleaved({"tilefuse": fn}, graphs=True)["tilefuse"]
            gbs = nbytes * numel * x.element_size() / (t.median_ms * 1e-3) / 1e9
            row[pass_name] = {"us": t.median_ms * 1e3, "of_copy": gbs / ceiling}
        out.append(row)
        print(f"| {dname} | {width} | {row['fwd']['us']:.1f} | {row['fwd']['of_copy']:.1%} | {row['fwd+bwd']['us']:.1f} "
              f"| {row['fwd+bwd']['of_copy']:.1%} | {row['configs']['fwd']} / {row['configs']['bwd']} |", flush=True)
        del x, a, w, b, dy
    print(f"copy ceiling {dname}: {ceiling:.0f} GB/s", flush=True)
if args.json:
    json.dump(out, open(args.json, "w"), indent=1)
