"""Run 34 (GPU): run 33's Gluon quantizer again, timed as CUDA-graph replays (run 33's do_bench of
eager calls was host-bound below about 160 us a call for the Gluon launches), at layouts whose
transposed stores fill whole 32-byte sectors, and persistent with TMA loads into a ring
(fp8_cols_tma_kernel: the tiles ahead load under this one's work; one 8-warp program an SM held
run 33's form to one tile's load, arithmetic and stores at a time). Bits first, as run 33 checks
them, for every new variant.

    PYTHONPATH=src python3 benchmarks/results/2026-12-07-h200-bf/run34_gluon_quant_tma.py [--rounds 3] [--shapes 1,2,3]
"""
import argparse
import importlib.util
import statistics
from pathlib import Path

import torch
import triton

from tilefuse.quant import launch as L

_spec = importlib.util.spec_from_file_location("run33_gluon_quant", Path(__file__).with_name("run33_gluon_quant.py"))
RUN33 = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(RUN33)

# name: (layout, maxnreg, TMA ring stages; 0 for fp8_cols_kernel). r128: registers capped at 128
# (two programs an SM; 184 bytes a thread spilled by the pair under triton 3.6, none by the column copy)
VARIANTS = {"g8x8w": ((8, 8, 4, 4, 2), None, 0), "g8x8t": ((8, 8, 8, 2, 4), None, 0),
            "g4x8": ((4, 8, 8, 4, 4), None, 0), "tma8x8w-3": ((8, 8, 4, 4, 2), None, 3),
            "tma8x8t-3": ((8, 8, 8, 2, 4), None, 3), "tma4x8-3": ((4, 8, 8, 4, 4), None, 3),
            "tma4x8-2": ((4, 8, 8, 4, 4), None, 2), "tma8x8w-3r128": ((8, 8, 4, 4, 2), 128, 3)}


def gluon(x, counts, rows, variant, pow2=False):
    layout, maxnreg, stages = VARIANTS[variant]
    return L.fp8_cols_gluon(x, pow2, counts, rows, (layout, maxnreg), stages)


class _Launch:
    """quant.launch as run 33's check calls it, its configs run 34's variants (with the ring)."""
    fp8_block = staticmethod(L.fp8_block)

    @staticmethod
    def fp8_cols_gluon(x, pow2, counts, rows, variant):
        layout, maxnreg, stages = variant
        return L.fp8_cols_gluon(x, pow2, counts, rows, (layout, maxnreg), stages)


RUN33.L = _Launch
RUN33.CONFIGS = VARIANTS


def graphed(fn, reps=10):
    """(replay, reps): fn called reps times inside one CUDA graph."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(reps):
            fn()
    return g.replay, reps


def timing(label, T, N, E, rounds):
    x = torch.randn(T, N, device="cuda").to(torch.bfloat16)
    counts = torch.full((E,), T // E, dtype=torch.int32, device="cuda")
    out = torch.empty_like(x)
    fns = {"copy": lambda: out.copy_(x), "triton two": lambda: RUN33.triton_pair(x, counts),
           "triton cols": lambda: RUN33.triton_cols(x, counts)}
    for v in VARIANTS:
        fns[f"{v} pair"] = (lambda v: lambda: gluon(x, counts, True, v))(v)
        fns[f"{v} cols"] = (lambda v: lambda: gluon(x, counts, False, v))(v)
    graphs = {k: graphed(fn) for k, fn in fns.items()}
    times = {k: [] for k in fns}
    for _ in range(rounds):
        for k, (replay, reps) in graphs.items():
            times[k].append(triton.testing.do_bench(replay, warmup=25, rep=150, return_mode="median") / reps)
    med = {k: statistics.median(v) for k, v in times.items()}
    el = T * N
    copy_bw = 4 * el / med["copy"] / 1e6
    print(f"{label} (T {T}, N {N}, E {E}), graph replays; copy {med['copy'] * 1e3:.1f} us = {copy_bw:.0f} GB/s",
          flush=True)
    for k, v in med.items():
        if k == "copy":
            continue
        pair = "pair" in k or "two" in k
        nbytes = el * (6 if "two" in k else 4 if pair else 3)
        bw = nbytes / v / 1e6
        base = med["triton two"] if pair else med["triton cols"]
        print(f"  {k:16s} {v * 1e3:8.1f} us  {bw:6.0f} GB/s moved ({bw / copy_bw * 100:5.1f}% of copy)  "
              f"{base / v:5.3f}x the op's Triton launch(es)", flush=True)
    del graphs
    torch.cuda.empty_cache()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--shapes", default="1,2,3")
    args = ap.parse_args()
    print(torch.cuda.get_device_name(), torch.__version__, triton.__version__, flush=True)
    ok = True
    for i, (T, N, E) in enumerate(((1000, 256, 4), (3000, 384, 7), (129, 128, 3), (5000, 1024, 64), (300, 128, 500))):
        ok &= RUN33.check("bits", T, N, E, i)
    print("bitwise against the Triton launches (ragged counts, specials, pow2 and not):",
          "all equal" if ok else "MISMATCH", flush=True)
    for s in (int(v) for v in args.shapes.split(",")):
        E, T, H, F = RUN33.SHAPES[s]
        ok &= RUN33.check(f"shape {s}", T, H, E, 10 + s)
        for name, N in (("x / dy", H), ("h", F), ("dz", 2 * F)):
            timing(f"shape {s} {name}", T, N, E, args.rounds)
    print("all bitwise" if ok else "SOME MISMATCH", flush=True)


if __name__ == "__main__":
    main()
