"""Run 1: ops/grouped_glu_mlp/ws_rows.py (the compose route's four row-ragged 16-bit GEMMs,
warp-specialised in Gluon, the 64-row halves wholly inside an expert stored by TMA) against
torch._grouped_mm (CUTLASS) doing the same GEMM.

1. Correct: small grouped problems (experts ending inside a tile, empty experts, T below a
   tile, N off the tile, K off 64 by rows), bf16 and fp16, tiles (256, 3) (128, 4) (128, 6),
   1, 3 or all programs, outputs poisoned with NaN: whether the bits equal _grouped_mm's
   (bf16: CUTLASS; fp16: torch's per-group loop) and the normwise error against float64.
2. Time: fc1, fc2, fc2 dgrad, fc1 dgrad at the spec's three shapes, balanced and routed
   (multinomial) counts, interleaved, graph replay.

    PYTHONPATH=src python3 benchmarks/results/2026-12-03-h200-ab/run1_ws_rows.py [--rounds 7]
"""
import argparse

import torch

from tilefuse.ops.grouped_glu_mlp import ws_rows
from tilefuse.ops.grouped_glu_mlp.tune import DEFAULT_SHAPES
from tilefuse.tuning import timing
from tilefuse.utils import normwise_rel_error

TILES = ((256, 3), (128, 4), (128, 5), (128, 6))


def roles(x, dy, h, dz, w1, w2):
    """{role: (a, w, rows, torch._grouped_mm's (a, b))}."""
    return {"fc1": (x, w1, True, (x, w1.transpose(-2, -1))), "fc2": (h, w2, True, (h, w2.transpose(-2, -1))),
            "fc2 dgrad": (dy, w2, False, (dy, w2)), "fc1 dgrad": (dz, w1, False, (dz, w1))}


def reference(a, w, rows, counts):
    out, s = [], 0
    for e, c in enumerate(counts):
        b = w[e].double().t() if rows else w[e].double()
        out.append(a[s:s + c].double() @ b)
        s += c
    return torch.cat(out)


def tensors(counts, H, F, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    T, E = sum(counts), len(counts)
    t = {k: torch.randn(T, n, generator=g).to(dtype).cuda() for k, n in (("x", H), ("dy", H), ("h", F),
                                                                          ("dz", 2 * F))}
    w1 = (torch.randn(E, 2 * F, H, generator=g) * 0.05).to(dtype).cuda()
    w2 = (torch.randn(E, H, F, generator=g) * 0.05).to(dtype).cuda()
    return t, w1, w2


def check_small():
    cases = [([300, 0, 211, 17], 256, 192), ([64, 128, 192], 128, 128), ([1, 63, 65, 0, 640], 384, 256),
             ([0, 0, 513, 0], 256, 320), ([5, 7, 90, 20], 128, 136), ([40], 64, 96), ([130, 0, 0, 2], 200, 64)]
    n = same = bad = skipped = 0
    worst = 0.0
    for dtype in (torch.bfloat16, torch.float16):
        for i, (counts, H, F) in enumerate(cases):
            t, w1, w2 = tensors(counts, H, F, dtype, i)
            c = torch.tensor(counts, dtype=torch.int32, device="cuda")
            offs = torch.cumsum(c, 0).to(torch.int32)
            for role, (a, w, rows, (ga, gb)) in roles(t["x"], t["dy"], t["h"], t["dz"], w1, w2).items():
                want = torch._grouped_mm(ga, gb, offs=offs)
                ref = reference(a, w, rows, counts)
                for block_n, stages in TILES:
                    for programs in (None, 1, 3):
                        got = torch.full_like(want, float("nan"))
                        if not ws_rows.launch(a, w, got, c, rows=rows, block_n=block_n, stages=stages,
                                              programs=programs):
                            skipped += 1   # K off 64 by columns: the caller's _grouped_mm
                            continue
                        n += 1
                        err = normwise_rel_error(got, ref)
                        worst = max(worst, err)
                        if torch.equal(got.view(torch.int16), want.view(torch.int16)):
                            same += 1
                        if got.isnan().any() or err > 2 * torch.finfo(dtype).eps:
                            bad += 1
                            print(f"  BAD {dtype} {role} counts {counts} H {H} F {F} tile {block_n} s{stages} "
                                  f"p{programs}: {err:.2e}, nan {got.isnan().sum().item()}")
    print(f"small problems: {n} runs ({skipped} not applicable), {same} bitwise _grouped_mm, {bad} wrong, "
          f"worst normwise error vs float64 {worst:.2e}", flush=True)


def routed(E, T, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.bincount(torch.multinomial(torch.rand(E, generator=g), T, replacement=True, generator=g),
                          minlength=E).tolist()


def time_shape(index, E, T, H, F, kind, rounds):
    counts = [T // E] * E if kind == "balanced" else routed(E, T, index)
    t, w1, w2 = tensors(counts, H, F, torch.bfloat16, index)
    c = torch.tensor(counts, dtype=torch.int32, device="cuda")
    offs = torch.cumsum(c, 0).to(torch.int32)
    total = {}
    for role, (a, w, rows, (ga, gb)) in roles(t["x"], t["dy"], t["h"], t["dz"], w1, w2).items():
        want = torch._grouped_mm(ga, gb, offs=offs)
        out = torch.full_like(want, float("nan"))
        flop = 2 * T * a.shape[1] * want.shape[1]
        same = all(ws_rows.launch(a, w, out.fill_(float("nan")), c, rows=rows, block_n=bn, stages=s)
                   and torch.equal(out.view(torch.int16), want.view(torch.int16)) for bn, s in TILES)

        def ours(block_n, stages):
            return lambda: ws_rows.launch(a, w, out, c, rows=rows, block_n=block_n, stages=stages)
        providers = {"CUTLASS": lambda: torch._grouped_mm(ga, gb, offs=offs),
                     **{f"ws {bn} s{s}": ours(bn, s) for bn, s in TILES}}
        res = timing.interleaved(providers, rounds=rounds, graphs=True)
        print(f"shape {index} {kind} {role} (every tile bitwise _grouped_mm: {same}), ms, graph replay")
        for name, r in res.items():
            if isinstance(r, Exception):
                print(f"  {name:12s} FAILED {r}")
                continue
            total[name] = total.get(name, 0.0) + r.median_ms
            print(f"  {name:12s} {r.median_ms:7.3f} {flop / r.median_ms / 1e9:6.0f} TFLOP/s "
                  f"{timing.ratio(res['CUTLASS'], r):5.2f}x CUTLASS", flush=True)
    print(f"shape {index} {kind} four GEMMs: " + ", ".join(
        f"{k} {v:.3f} ms ({total['CUTLASS'] / v:.3f}x)" for k, v in total.items()), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--shapes", default="1,2,3")
    args = ap.parse_args()
    print(torch.__version__, torch.cuda.get_device_name())
    check_small()
    for s in [int(v) for v in args.shapes.split(",")]:
        for kind in ("balanced", "routed"):
            time_shape(s, *DEFAULT_SHAPES[s - 1], kind, args.rounds)
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
