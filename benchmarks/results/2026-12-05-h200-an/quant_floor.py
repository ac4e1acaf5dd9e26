"""fp8_block's quantizer launches of one step against their byte floor, at the spec's three
shapes (balanced counts): each launch the op makes (the two weights' pair quantizers, x's, h's
and dy's row-wise and column-wise copies, dz's column-wise copy), timed alone with
``triton.testing.do_bench`` medians (3 interleaved rounds), beside a copy of the same tensor
(``torch.Tensor.copy_``: reads and writes 2 bytes an element). A weight's pair quantizer moves
the copy's bytes (2 in, 1 + 1 out, plus scales); a row-wise or column-wise copy 3 bytes an
element, so its floor is 0.75x the copy's time. Prints one line a launch and the sums; with
``--json`` one JSON line a shape. ``--smoke``: one tiny shape through the interpreter (CPU).

    PYTHONPATH=src python3 benchmarks/results/2026-12-05-h200-an/quant_floor.py [--json F]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import torch

from tilefuse.ops.grouped_glu_mlp import recipes
from tilefuse.ops.grouped_glu_mlp.reference import random_inputs
from tilefuse.ops.grouped_glu_mlp.tune import DEFAULT_SHAPES

SHAPES = dict(enumerate(DEFAULT_SHAPES, 1))
SHAPES[0] = (4, 512, 256, 128)   # --smoke


def bench(fn, device):
    if device == "cpu":
        t0 = time.perf_counter()
        fn()
        return (time.perf_counter() - t0) * 1e3
    import triton.testing
    return triton.testing.do_bench(fn, warmup=10, rep=100, return_mode="median")


def shape_case(shape, device):
    E, T, H, F = SHAPES[shape]
    counts = [T // E] * E
    i = random_inputs(counts, H, F, torch.bfloat16, bias=False, device=device,
                      generator=torch.Generator().manual_seed(shape))
    c = i["counts"]
    g = torch.Generator().manual_seed(7)
    h = torch.randn(T, F, generator=g).bfloat16().to(device)
    dz = torch.randn(T, 2 * F, generator=g).bfloat16().to(device)
    q = "fp8_block"
    # (name, the launch, the tensor it reads, floor as a fraction of a copy of that tensor)
    launches = [
        ("W1 pair", lambda: recipes.quantize_weight_pair(q, i["w1"]), i["w1"], 1.0),
        ("W2 pair", lambda: recipes.quantize_weight_pair(q, i["w2"]), i["w2"], 1.0),
        ("x rows", lambda: recipes.quantize_rows(q, i["x"]), i["x"], 0.75),
        ("x cols", lambda: recipes.quantize_cols(q, i["x"], c), i["x"], 0.75),
        ("h rows", lambda: recipes.quantize_rows(q, h), h, 0.75),
        ("h cols", lambda: recipes.quantize_cols(q, h, c), h, 0.75),
        ("dy rows", lambda: recipes.quantize_rows(q, i["dy"]), i["dy"], 0.75),
        ("dy cols", lambda: recipes.quantize_cols(q, i["dy"], c), i["dy"], 0.75),
        ("dz cols", lambda: recipes.quantize_cols(q, dz, c), dz, 0.75),
    ]
    copies = {}
    for name, _, t, _ in launches:
        copies.setdefault(id(t), (t, torch.empty_like(t)))
    fns = {name: fn for name, fn, _, _ in launches}
    fns.update({f"copy {k}": (lambda s=s, d=d: d.copy_(s)) for k, (s, d) in copies.items()})
    for fn in fns.values():
        fn()
    times = {k: [] for k in fns}
    for _ in range(1 if device == "cpu" else 3):
        for k, fn in fns.items():
            times[k].append(bench(fn, device))
    ms = {k: statistics.median(v) for k, v in times.items()}
    rows = []
    for name, _, t, frac in launches:
        copy_ms = ms[f"copy {id(t)}"]
        gb = t.numel() * t.element_size() * 2 * frac / 1e9   # bytes the launch must move
        rows.append({"launch": name, "shape": list(t.shape), "us": ms[name] * 1e3,
                     "floor_us": copy_ms * frac * 1e3, "copy_us": copy_ms * 1e3,
                     "gbps": gb / (ms[name] / 1e3)})
    return {"shape": shape, "rows": rows}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default=None)
    ap.add_argument("--smoke", action="store_true")
    args = ap.parse_args()
    device = "cpu" if args.smoke else "cuda"
    if args.smoke:
        os.environ.setdefault("TRITON_INTERPRET", "1")
    if device == "cuda":
        print(torch.cuda.get_device_name(), torch.__version__, flush=True)
    for shape in ([0] if args.smoke else [1, 2, 3]):
        r = shape_case(shape, device)
        total = sum(x["us"] for x in r["rows"])
        floor = sum(x["floor_us"] for x in r["rows"])
        w = sum(x["us"] for x in r["rows"][:2])
        print(f"shape {shape} {SHAPES[shape]}: nine launches {total:.0f} us against a copy floor of "
              f"{floor:.0f} us ({floor / total:.0%}); the weights' two {w:.0f} us", flush=True)
        for x in r["rows"]:
            print(f"  {x['launch']:8} {str(x['shape']):22} {x['us']:8.1f} us  floor {x['floor_us']:7.1f} "
                  f"({x['floor_us'] / x['us']:.0%})  {x['gbps']:6.0f} GB/s", flush=True)
        if args.json:
            with open(args.json, "a") as f:
                f.write(json.dumps(r) + "\n")
        del r
        if device == "cuda":
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
