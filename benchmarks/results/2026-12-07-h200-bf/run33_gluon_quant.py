"""Run 33 (GPU): fp8_block's column-wise copies through the Gluon kernel (quant.gluon_kernels.
fp8_cols_kernel, launched by quant.launch.fp8_cols_gluon) against the Triton launches the op runs.

With ROWS (x, h, dy: the row-wise 1 x 128 and the column-wise 128 x 1 grouped copy from one read)
against quantize_rows + quantize_cols (two launches, the op's) and the Triton paired launch
(fp8_block_rows_cols); without (dz's column-wise copy alone) against fp8_block(.., (128, 1),
counts=..). Every output bitwise the Triton launches' first (ragged counts with an empty expert,
NaN / inf / huge / tiny entries, pow2 scales too), then do_bench medians of interleaved rounds at
the spec's shapes (balanced counts), with a copy of the same bytes timed beside them.

    PYTHONPATH=src python3 benchmarks/results/2026-12-07-h200-bf/run33_gluon_quant.py [--rounds 5] [--shapes 1,2,3]
"""
import argparse
import statistics

import torch
import triton

from tilefuse.quant import launch as L

SHAPES = {1: (8, 16384, 4096, 3584), 2: (64, 32768, 2048, 1408), 3: (128, 65536, 2048, 768)}
CONFIGS = {"g8x8": ((8, 8, 2, 8, 1), None), "g8x8r128": ((8, 8, 2, 8, 1), 128), "g8x8w": ((8, 8, 4, 4, 2), None),
           "g16x4": ((16, 4, 1, 8, 1), None)}


def triton_pair(x, counts, pow2=False):
    rows = L.fp8_block(x, (1, 128), pow2, scales_transposed=True)
    cols = L.fp8_block(x, (128, 1), pow2, transpose=True, counts=counts)
    return rows, cols


def triton_cols(x, counts, pow2=False):
    return L.fp8_block(x, (128, 1), pow2, transpose=True, counts=counts)


def same(a, b):
    (da, sa), (db, sb) = a, b
    return (da.shape == db.shape and sa.shape == sb.shape and torch.equal(da.view(torch.uint8), db.view(torch.uint8))
            and torch.equal(sa.view(torch.int32), sb.view(torch.int32)))


def check(name, T, N, E, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = (torch.randn(T, N, device="cuda", generator=g) * 3).to(torch.bfloat16)
    flat = x.view(-1)
    idx = torch.randint(0, flat.numel(), (64,), device="cuda", generator=g)
    flat[idx[:8]] = float("nan")
    flat[idx[8:16]] = float("inf")
    flat[idx[16:24]] = -float("inf")
    flat[idx[24:32]] = 1e30
    flat[idx[32:40]] = 1e-30
    x[: min(T, 5)] = 0
    w = torch.rand(E, device="cuda", generator=g)
    w[E // 2] = 0
    counts = torch.floor(w / w.sum() * T).to(torch.int64)
    counts[0] += T - counts.sum()
    counts = counts.to(torch.int32)
    ok = True
    for pow2 in (False, True):
        ref = triton_pair(x, counts, pow2)
        for cname, cfg in CONFIGS.items():
            got = L.fp8_cols_gluon(x, pow2, counts, True, cfg)
            r = same(got[0], ref[0]) and same(got[1], ref[1])
            c = same(L.fp8_cols_gluon(x, pow2, counts, False, cfg), ref[1])
            ok &= r and c
            if not (r and c):
                print(f"  MISMATCH {name} T {T} N {N} E {E} pow2 {pow2} {cname}: pair {r} cols {c}", flush=True)
    return ok


def bench(fn):
    return triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median")


def timing(label, T, N, E, rounds):
    x = torch.randn(T, N, device="cuda").to(torch.bfloat16)
    counts = torch.full((E,), T // E, dtype=torch.int32, device="cuda")
    out = torch.empty_like(x)
    fns = {"copy": lambda: out.copy_(x), "triton two": lambda: triton_pair(x, counts),
           "triton paired": lambda: L.fp8_block_rows_cols(x, False, counts),
           "triton cols": lambda: triton_cols(x, counts)}
    for cname, cfg in CONFIGS.items():
        fns[f"{cname} pair"] = (lambda c: lambda: L.fp8_cols_gluon(x, False, counts, True, c))(cfg)
        fns[f"{cname} cols"] = (lambda c: lambda: L.fp8_cols_gluon(x, False, counts, False, c))(cfg)
    times = {k: [] for k in fns}
    for _ in range(rounds):
        for k, fn in fns.items():
            times[k].append(bench(fn))
    med = {k: statistics.median(v) for k, v in times.items()}
    el = T * N
    copy_bw = 4 * el / med["copy"] / 1e6   # GB/s: bf16 read + write
    print(f"{label} (T {T}, N {N}, E {E}); copy {med['copy'] * 1e3:.1f} us = {copy_bw:.0f} GB/s", flush=True)
    for k, v in med.items():
        if k == "copy":
            continue
        nbytes = el * (4 if ("pair" in k or "two" in k or "paired" in k) else 3)
        bw = nbytes / v / 1e6
        base = med["triton two"] if ("pair" in k or "paired" in k) else med["triton cols"]
        print(f"  {k:16s} {v * 1e3:8.1f} us  {bw:6.0f} GB/s  {bw / copy_bw * 100:5.1f}% of copy  "
              f"{base / v:5.3f}x the op's Triton launch(es)", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--shapes", default="1,2,3")
    args = ap.parse_args()
    print(torch.cuda.get_device_name(), torch.__version__, triton.__version__, flush=True)
    ok = True
    for i, (T, N, E) in enumerate(((1000, 256, 4), (3000, 384, 7), (129, 128, 3), (5000, 1024, 64))):
        ok &= check("bits", T, N, E, i)
    print("bitwise against the Triton launches (ragged counts, specials, pow2 and not, 4 configs):",
          "all equal" if ok else "MISMATCH", flush=True)
    for s in (int(v) for v in args.shapes.split(",")):
        E, T, H, F = SHAPES[s]
        ok &= check(f"shape {s}", T, H, E, 10 + s)
        for name, N in (("x / dy", H), ("h", F), ("dz", 2 * F)):
            timing(f"shape {s} {name}", T, N, E, args.rounds)
            torch.cuda.empty_cache()
    print("all bitwise" if ok else "SOME MISMATCH", flush=True)


if __name__ == "__main__":
    main()
