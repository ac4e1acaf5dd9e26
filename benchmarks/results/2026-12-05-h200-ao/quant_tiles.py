"""fp8_block's quantizer tiles on this GPU: each launch kind a grouped_glu_mlp fp8_block step
makes (the weight pair in 128 x 128 blocks, a row-wise 1 x 128 copy, a column-wise 128 x 1 copy
grouped by expert and written transposed) at the tiles ``quant.launch.FP8_TILES`` holds and at
alternatives, on the tensors of the spec's three shapes (balanced counts). Each (launch, tile)
is timed as CUDA-graph replays of 10 launches (CUDA events, medians of 5 interleaved rounds),
so the host's cost of a call is out of it, beside a copy of the same tensor the same way (the
byte floor: a weight pair moves a copy's bytes, an activation's one-way copy 0.75 of them).
Every alternative's outputs are compared bitwise with the default tile's first.

-an run 1 (H100) put the weight pairs at 72% of the copy's bandwidth (53-60% of the step's
quantizer time at shapes 2-3), the column copies at 74-82% and h's copies (768 and 1408
columns) at 37-62%, with tiles chosen on the H200 in 2026-11-30-h200-f; this says whether
another tile does better on the card it runs on.

    PYTHONPATH=src python3 benchmarks/results/2026-12-05-h200-ao/quant_tiles.py [--shapes 1,2,3] [--json F]
    TRITON_INTERPRET=1 PYTHONPATH=src python3 .../quant_tiles.py --smoke     # CPU: the script, not a measurement
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import torch

from tilefuse.ops.grouped_glu_mlp.reference import random_inputs
from tilefuse.ops.grouped_glu_mlp.tune import DEFAULT_SHAPES
from tilefuse.quant import launch as ql

SHAPES = dict(enumerate(DEFAULT_SHAPES, 1))
SHAPES[0] = (2, 256, 256, 128)   # --smoke

# (BLOCK_M, widest BLOCK_K, num_warps); the first of each is the shipped one (asserted).
TILES = {
    (128, 128): [(128, 128, 8), (128, 128, 4), (128, 128, 16), (256, 128, 8), (128, 256, 8), (128, 256, 16)],
    (1, 128): [(32, 128, 4), (64, 128, 4), (64, 128, 8), (16, 128, 2), (32, 256, 4), (16, 512, 4)],
    (128, 1): [(128, 64, 4), (128, 32, 4), (128, 64, 8), (128, 128, 8), (128, 32, 2), (128, 128, 4)],
}


def launches(shape, device):
    """(name, block, the call, the tensor it reads, floor fraction of a copy)."""
    E, T, H, F = SHAPES[shape]
    i = random_inputs([T // E] * E, H, F, torch.bfloat16, bias=False, device=device,
                      generator=torch.Generator().manual_seed(shape))
    c = i["counts"]
    g = torch.Generator().manual_seed(3)
    h = torch.randn(T, F, generator=g).bfloat16().to(device)
    dz = torch.randn(T, 2 * F, generator=g).bfloat16().to(device)
    x = i["x"]
    return [
        ("W1 pair", (128, 128), lambda: ql.fp8_block(i["w1"], (128, 128), False, with_transposed=True), i["w1"], 1.0),
        ("W2 pair", (128, 128), lambda: ql.fp8_block(i["w2"], (128, 128), False, with_transposed=True), i["w2"], 1.0),
        ("x rows", (1, 128), lambda: ql.fp8_block(x, (1, 128), False, scales_transposed=True), x, 0.75),
        ("h rows", (1, 128), lambda: ql.fp8_block(h, (1, 128), False, scales_transposed=True), h, 0.75),
        ("x cols", (128, 1), lambda: ql.fp8_block(x, (128, 1), False, transpose=True, counts=c), x, 0.75),
        ("h cols", (128, 1), lambda: ql.fp8_block(h, (128, 1), False, transpose=True, counts=c), h, 0.75),
        ("dz cols", (128, 1), lambda: ql.fp8_block(dz, (128, 1), False, transpose=True, counts=c), dz, 0.75),
    ]


def flat(out):
    return [t for pair in (out if isinstance(out[0], tuple) else (out,)) for t in pair]


_POOL = None


def sampler(fn, device, reps=10):
    """Seconds per call of ``fn``: CUDA-graph replays of ``reps`` calls (CPU: one eager call)."""
    if device == "cpu":
        def sample():
            t0 = time.perf_counter()
            fn()
            return time.perf_counter() - t0
        return sample
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    global _POOL
    if _POOL is None:   # one pool for every graph: they replay one at a time, outputs discarded
        _POOL = torch.cuda.graph_pool_handle()
    with torch.cuda.graph(graph, pool=_POOL):
        for _ in range(reps):
            fn()
    graph.replay()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def sample():
        start.record()
        for _ in range(5):
            graph.replay()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3 / (5 * reps)
    sample.graph = graph   # kept alive with the sampler
    return sample


def run_shape(shape, device, rounds):
    rows = []
    for name, block, fn, t, frac in launches(shape, device):
        default = ql.FP8_TILES[block]
        assert TILES[block][0] == default, f"{block}: shipped tile {default}, the script's first {TILES[block][0]}"
        want = [o.clone() for o in flat(fn())]
        samplers, bits = {}, {}
        dst = torch.empty_like(t)
        samplers["copy"] = sampler(lambda: dst.copy_(t), device)
        try:
            for tile in TILES[block]:
                ql.FP8_TILES[block] = tile
                try:
                    got = flat(fn())
                    bits[tile] = all(torch.equal(a.view(torch.uint8), b.view(torch.uint8)) for a, b in zip(got, want))
                    del got
                    samplers[tile] = sampler(fn, device)
                except Exception as exc:  # noqa: BLE001 - a tile that does not compile or fit is reported
                    bits[tile] = f"{type(exc).__name__}: {str(exc)[:80]}"
                finally:
                    ql.FP8_TILES[block] = default
            times = {k: [] for k in samplers}
            for r in range(rounds):
                order = list(samplers)[r % len(samplers):] + list(samplers)[:r % len(samplers)]
                for k in order:
                    times[k].append(samplers[k]())
        finally:
            ql.FP8_TILES[block] = default
        copy_us = statistics.median(times.pop("copy")) * 1e6
        floor = copy_us * frac
        row = {"shape": shape, "launch": name, "tensor": list(t.shape), "floor_us": floor, "tiles": {}}
        for tile in TILES[block]:
            us = statistics.median(times[tile]) * 1e6 if tile in times else None
            row["tiles"]["x".join(map(str, tile[:2])) + f"w{tile[2]}"] = {
                "us": us, "of_floor": floor / us if us else None, "bitwise": bits.get(tile)}
        rows.append(row)
        line = "  ".join(f"{k} {v['us']:.1f}us {v['of_floor']:.0%}{'' if v['bitwise'] is True else ' BITS ' + str(v['bitwise'])}"
                         if v["us"] else f"{k} {v['bitwise']}" for k, v in row["tiles"].items())
        print(f"shape {shape} {name:8} {str(list(t.shape)):20} floor {floor:7.1f}us | {line}", flush=True)
        del samplers, want, dst
        if device == "cuda":
            torch.cuda.empty_cache()
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="1,2,3")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json", default=None)
    ap.add_argument("--smoke", action="store_true")
    args = ap.parse_args()
    device = "cpu" if args.smoke else "cuda"
    if args.smoke:
        os.environ.setdefault("TRITON_INTERPRET", "1")
        TILES[(128, 128)] = TILES[(128, 128)][:2]
        TILES[(1, 128)] = TILES[(1, 128)][:2]
        TILES[(128, 1)] = TILES[(128, 1)][:2]
    else:
        print(torch.cuda.get_device_name(), torch.__version__, flush=True)
    for shape in ([0] if args.smoke else [int(s) for s in args.shapes.split(",")]):
        rows = run_shape(shape, device, 1 if args.smoke else args.rounds)
        if args.json:
            with open(args.json, "a") as f:
                for row in rows:
                    f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
