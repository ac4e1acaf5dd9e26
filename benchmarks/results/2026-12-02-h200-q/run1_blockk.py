"""Run 1: the so2 layer GEMMs with BLOCK_K = 2 Cf against BLOCK_K = Cf (the table's and every
candidate's today), exact and 3xfp16, at the tiles the sweeps try.

Per shape and config: the forward gated pair and the backward pair (launch._gemm / _gemm_t on
one layer's weights), interleaved (timing.interleaved, CUDA-graph replay, 5 rounds). Exact:
the K = 2 Cf outputs compared bitwise with K = Cf at the same tile (the FMA dots accumulate k
in order either way). 3xfp16: the backward pair's normwise error against float64 on the first
2**16 edges, beside the exact path's (the row scales are per K tile, so K changes the split).

    PYTHONPATH=src python3 benchmarks/results/2026-12-02-h200-q/run1_blockk.py
    TRITON_INTERPRET=1 PYTHONPATH=src python3 benchmarks/results/2026-12-02-h200-q/run1_blockk.py --tiny
"""

from __future__ import annotations

import sys

import torch

from tilefuse.ops.so2_mixing_stack import kernels, launch
from tilefuse.ops.so2_mixing_stack.configs import FP16X3, So2Config
from tilefuse.ops.so2_mixing_stack.reference import So2Dims
from tilefuse.tuning import timing

F = 2
SHAPES = ((647000, 3, 32), (300000, 6, 32), (400000, 2, 64))
EXACT_TILES = ((32, 64, 4, 2), (64, 64, 4, 2), (32, 128, 4, 2), (64, 128, 8, 2), (128, 64, 8, 2))
FP16_TILES = ((64, 64, 4, 3), (64, 64, 4, 2), (128, 64, 4, 3), (64, 128, 4, 3), (128, 128, 8, 3), (128, 64, 8, 3))
CHECK_EDGES = 2 ** 16


def main():
    tiny = "--tiny" in sys.argv
    dev = "cpu" if tiny else "cuda"
    shapes = ((300, 1, 16), (200, 2, 32)) if tiny else SHAPES
    kw = dict(timer=timing.WallTimer(), rounds=1) if tiny else dict(rounds=5)
    print(f"# {'CPU' if tiny else torch.cuda.get_device_name()}; torch {torch.__version__}")
    for E, lmax, cf in shapes:
        d = So2Dims(lmax, cf)
        g = torch.Generator(device=dev).manual_seed(E)

        def randn(*shape, scale=1.0):
            return torch.randn(shape, generator=g, device=dev) * scale

        a, res = randn(F, E, d.row, scale=0.5), randn(F, E, d.row)
        out, z = torch.empty_like(a), torch.empty_like(a)
        sigma = torch.rand(F, E, d.lg, generator=g, device=dev)
        w0, w1 = randn(1, F, d.m0, d.m0, scale=d.m0 ** -0.5), randn(1, F, d.m1, d.m1, scale=d.m1 ** -0.5)
        ks = [k for k in (cf, 2 * cf) if k <= 64]
        n = min(E, CHECK_EDGES)
        a64, r64 = a[:, :n].double(), res[:, :n].double()
        ref = r64 + torch.cat([a64[..., :d.m0] @ w0[0].double().transpose(-1, -2),
                               a64[..., d.m0:] @ w1[0].double().transpose(-1, -2)], -1)

        def err(x):
            return float((x[:, :n].double() - ref).norm() / ref.norm())

        providers, outputs = {}, {}
        for precision, tiles in (("ieee", EXACT_TILES), (FP16X3, FP16_TILES)):
            for bm, bn, w, s in tiles:
                for k in ks:
                    cfg = So2Config(bm, bn, k, w, s, precision=precision)
                    w0g, w1g = (launch._layer(launch._weights(x, cfg), 0) for x in (w0, w1))
                    w0t, w1t = (launch._layer(launch._weights(x, cfg, transpose=True), 0) for x in (w0, w1))

                    def fwd(w0g=w0g, w1g=w1g, cfg=cfg):
                        launch._gemm(kernels.FWD_GATED, a, w0g, a, out, d, cfg, k_start=0, k_len=d.m0,
                                     n_start=cf, n_len=d.m0 - cf, z=z, sigma=sigma)
                        launch._gemm(kernels.FWD_GATED, a, w1g, a, out, d, cfg, k_start=d.m0, k_len=d.m1,
                                     n_start=d.m0, n_len=d.m1, z=z, sigma=sigma)

                    def bwd(w0t=w0t, w1t=w1t, cfg=cfg):
                        launch._gemm_t(a, w0t, w1t, res, out, d, cfg)

                    tag = f"{precision:6s} M{bm:<3d} N{bn:<3d} w{w} s{s} K{k}"
                    out.fill_(float("nan"))
                    bwd()
                    outputs[tag] = out.clone() if precision == "ieee" else None
                    e = err(out)
                    base = f"{precision:6s} M{bm:<3d} N{bn:<3d} w{w} s{s} K{cf}"
                    same = "" if precision != "ieee" or k == cf else \
                        f" bitwise-equal-to-K{cf} {torch.equal(outputs[tag], outputs[base])}"
                    print(f"  {tag}: bwd pair error vs float64 {e:.3e}{same}")
                    providers[f"{tag} fwd"] = fwd
                    providers[f"{tag} bwd"] = bwd
        outputs.clear()
        t = timing.interleaved(providers, graphs=not tiny, **kw)
        print(f"\n## E={E} lmax={lmax} Cf={cf} (ms; speedup of K={2 * cf} over K={cf} at the same tile)")
        for name, r in t.items():
            k_tag = name.split()[-2]
            extra = ""
            if k_tag != f"K{cf}":
                b = t[name.replace(k_tag, f"K{cf}")]
                extra = f"  x{timing.ratio(b, r):.3f} vs K{cf}"
            print(f"  {name:40s} {r.median_ms:8.3f}  (spread {r.spread:.1%}){extra}")
        del a, res, out, z, sigma, providers
        if not tiny:
            torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
