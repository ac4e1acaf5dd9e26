"""Run 4 (prepared): the forward gate kernel with its scalar block s in 3xfp16 ("3xfp16-gate",
94fe1f7) against the exact s it has under every other precision, at the three spec shapes.

Per shape: the gate kernel of one layer alone (S_PRECISION "ieee" and "3xfp16", the weights
split as the forward splits them; on the launch's 2 warps and on 4), and the whole forward at level 3's tiles in 3xfp16 and in
3xfp16-gate, interleaved (timing.interleaved, CUDA-graph replay, 5 rounds); s's normwise error
against float64 under each.

    PYTHONPATH=src python3 benchmarks/results/2026-12-02-h200-q/run4_gate.py
    TRITON_INTERPRET=1 PYTHONPATH=src python3 benchmarks/results/2026-12-02-h200-q/run4_gate.py --tiny
"""

from __future__ import annotations

import sys

import torch

from tilefuse.ops.so2_mixing_stack import kernels, launch
from tilefuse.ops.so2_mixing_stack.configs import FP16X3, FP16X3_GATE, So2Config, cf_padded
from tilefuse.ops.so2_mixing_stack.reference import So2Dims
from tilefuse.tuning import timing
from tilefuse.utils import cdiv

F, NL = 2, 3
SHAPES = ((647000, 3, 32, (64, 64, 4, 3)), (300000, 6, 32, (64, 128, 4, 3)), (400000, 2, 64, (128, 128, 8, 3)))
CHECK_EDGES = 2 ** 16


def main():
    tiny = "--tiny" in sys.argv
    dev = "cpu" if tiny else "cuda"
    shapes = ((300, 1, 16, (64, 64, 4, 3)),) if tiny else SHAPES
    kw = dict(timer=timing.WallTimer(), rounds=1) if tiny else dict(rounds=5)
    print(f"# {'CPU' if tiny else torch.cuda.get_device_name()}; torch {torch.__version__}")
    for E, lmax, cf, (bm, bn, warps, stages) in shapes:
        d = So2Dims(lmax, cf)
        g = torch.Generator(device=dev).manual_seed(E)

        def randn(*shape, scale=1.0):
            return torch.randn(shape, generator=g, device=dev) * scale

        u0 = randn(F, E, d.row, scale=0.5)
        alpha = torch.rand(E, F, generator=g, device=dev) + 0.2
        w0, w1 = randn(NL, F, d.m0, d.m0, scale=d.m0 ** -0.5), randn(NL, F, d.m1, d.m1, scale=d.m1 ** -0.5)
        gw = randn(NL - 1, F, cf, d.lg, scale=cf ** -0.5)
        cfgs = {p: So2Config(bm, bn, cf, warps, stages, precision=p) for p in (FP16X3, FP16X3_GATE)}
        n = min(E, CHECK_EDGES)
        s_ref = u0[:, :n, :d.m0].double() @ w0[0, :, :, :cf].double()
        z, u_next = torch.empty_like(u0), torch.empty_like(u0)
        sigma = torch.empty(F, E, d.lg, device=dev)
        split = launch._weight_parts(launch._layer(launch._weights(w0.contiguous(), cfgs[FP16X3]), 0), FP16X3)

        def gate(s_precision, warps):
            w = split if s_precision == FP16X3 else (w0[0],) * 3

            def fn():
                kernels.so2_fwd_gate_kernel[(F * cdiv(E, launch.GATE_BLOCK_M),)](
                    u0, *w, gw[0], z, u_next, sigma, E, d.row, d.m0, d.lg, cf, IEEE=True, S_PRECISION=s_precision,
                    BLOCK_M=launch.GATE_BLOCK_M, CF_P=cf_padded(cf), BLOCK_K=cf, num_warps=warps)
            return fn

        # the launch's warps (launch.GATE_WARPS) first; 4 warps beside it (2026-12-02-h200-n run 1
        # found 32 rows on 4 warps 1.16x faster at Neo with the exact s, slower elsewhere)
        providers = {}
        for warps in (launch.GATE_WARPS, 4):
            for s_precision in ("ieee", FP16X3):
                fn = gate(s_precision, warps)
                fn()
                err = float((z[:, :n, :cf].double() - s_ref).norm() / s_ref.norm())
                print(f"  E={E} lmax={lmax} Cf={cf}: gate kernel, s {s_precision:6s}, {warps} warps: "
                      f"s error vs float64 {err:.3e}")
                providers[f"gate kernel, s {s_precision}, {warps} warps"] = fn
        for p, cfg in cfgs.items():
            providers[f"forward, {cfg.name}"] = (lambda cfg=cfg: launch.forward(u0, alpha, w0, w1, gw, d, True,
                                                                                 config=cfg))
        t = timing.interleaved(providers, graphs=not tiny, **kw)
        print(f"\n## E={E} lmax={lmax} Cf={cf} (ms)")
        for name, r in t.items():
            print(f"  {name:55s} {r.median_ms:8.3f}  (spread {r.spread:.1%})")
        a, b = t[f"gate kernel, s ieee, {launch.GATE_WARPS} warps"], t[f"gate kernel, s {FP16X3}, {launch.GATE_WARPS} warps"]
        f0, f1 = t[f"forward, {cfgs[FP16X3].name}"], t[f"forward, {cfgs[FP16X3_GATE].name}"]
        print(f"  gate kernel exact / split {timing.ratio(a, b):.3f}; forward 3xfp16 / 3xfp16-gate "
              f"{timing.ratio(f0, f1):.3f}")
        del u0, z, u_next, sigma, providers
        if not tiny:
            torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
