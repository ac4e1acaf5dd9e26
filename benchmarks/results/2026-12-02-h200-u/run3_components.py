"""Run 3 (GPU only): where the fused Gluon layer's time goes (run 2: its two passes 1.28 ms
each and its sigma + gz_s pass 2.06 ms at Neo, against 1.04 ms a relay GEMM launch, 1.57 ms
the pointwise kernel, 0.34 ms the sigma kernel). Each kernel of one gated layer's backward
alone, at Neo and (300000, 6, 32), timed interleaved (CUDA-graph replay, 5 rounds):
the relay's sigma and pointwise kernels; the pointwise kernel writing gz_s only (GZ_S_ONLY);
so2_bwd_sigma_gzs_kernel at three launch shapes; the fused Gluon kernel's m = 0 and |m| = 1
passes (sigma now loaded a K tile ahead with g) and the relay's wgmma GEMM passes at the same
tiles; then the whole layer (relay against fused). Every gz_s, sigma and output is compared
bitwise with the relay's.

    PYTHONPATH=src python3 benchmarks/results/2026-12-02-h200-u/run3_components.py
"""

from __future__ import annotations

import sys

import torch
import triton


def main():
    from tilefuse.ops.so2_mixing_stack import kernels, launch, wgmma_kernels
    from tilefuse.ops.so2_mixing_stack.configs import FP16X3, So2Config
    from tilefuse.ops.so2_mixing_stack.kernels import BWD
    from tilefuse.ops.so2_mixing_stack.reference import So2Dims
    from tilefuse.tuning import timing
    print(f"# {torch.cuda.get_device_name()}; torch {torch.__version__}; triton {triton.__version__}", flush=True)
    F = 2
    for E, lmax, cf in ((647000, 3, 32), (300000, 6, 32)):
        d = So2Dims(lmax, cf)
        g = torch.Generator(device="cuda").manual_seed(E)
        g_cur = torch.randn(F, E, d.row, generator=g, device="cuda")
        z = torch.randn(F, E, d.row, generator=g, device="cuda") * 2
        gw = torch.randn(F, cf, d.lg, generator=g, device="cuda") * cf ** -0.5
        w0 = torch.randn(1, F, d.m0, d.m0, generator=g, device="cuda") * d.m0 ** -0.5
        w1 = torch.randn(1, F, d.m1, d.m1, generator=g, device="cuda") * d.m1 ** -0.5
        w0t = launch._layer(launch.split_fp16(w0.transpose(-1, -2)), 0)
        w1t = launch._layer(launch.split_fp16(w1.transpose(-1, -2)), 0)
        out = torch.empty_like(g_cur)
        sigma = torch.empty(F, E, d.lg, device="cuda")
        sigma2 = torch.empty_like(sigma)
        gz = torch.empty_like(g_cur)
        gz_s = torch.empty(F, E, cf, device="cuda")
        print(f"\n## E={E} lmax={lmax} Cf={cf}", flush=True)

        def pointwise(gz_s_only, bm=launch.POINTWISE_BLOCK_M, warps=launch.POINTWISE_WARPS):
            kernels.so2_bwd_pointwise_kernel[(F * triton.cdiv(E, bm),)](
                g_cur, z, sigma, gw, gz_s if gz_s_only else gz, sigma, E, d.row, d.m0, d.lg, cf, WRITE_GQ=False,
                IEEE=True, BLOCK_M=bm, CF_P=cf, GZ_S_ONLY=gz_s_only, num_warps=warps, num_stages=1)

        def merged(bm, warps):
            kernels.so2_bwd_sigma_gzs_kernel[(F * triton.cdiv(E, bm),)](
                g_cur, z, gw, sigma2, gz_s, E, d.row, d.m0, d.lg, cf, IEEE=True, BLOCK_M=bm, CF_P=cf,
                num_warps=warps, num_stages=1)

        def gluon_pass(cfg, seg_m0):
            wt, start, length = (w0t, 0, d.m0) if seg_m0 else (w1t, d.m0, d.m1)
            w, w_lo, w_scale = wt
            descs = wgmma_kernels.descriptors(w, w_lo, cfg.block_k, cfg.block_n)
            wgmma_kernels.so2_bwd_fused3x_wgmma_kernel[launch.tiled_grid(F, E, length, cfg)](
                g_cur, gz_s, sigma, *descs, w_scale, out, E, d.row, d.lg, start, length, start, length, w.shape[1],
                w_scale.stride(0), SEGMENT_M0=seg_m0, BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, CF=cf,
                num_warps=cfg.num_warps)

        def relay_pass(cfg, seg_m0):
            wt, start, length = (w0t, 0, d.m0) if seg_m0 else (w1t, d.m0, d.m1)
            launch._gemm(BWD, gz, wt, g_cur, out, d, cfg, k_start=start, k_len=length, n_start=start, n_len=length)

        # the reference values: the relay's sigma, gz and layer output
        launch._sigma(z, gw, sigma, d)
        pointwise(False)
        ref_gz = gz.clone()
        ref_sigma = sigma.clone()
        checks = {}
        for name, fn in (("pointwise gz_s only", lambda: pointwise(True)), ("merged 32r 2w", lambda: merged(32, 2)),
                         ("merged 64r 4w", lambda: merged(64, 4)), ("merged 32r 4w", lambda: merged(32, 4))):
            gz_s.fill_(float("nan"))
            sigma2.fill_(float("nan"))
            fn()
            checks[name] = torch.equal(gz_s, ref_gz[..., :cf]) and (name.startswith("pointwise")
                                                                     or torch.equal(sigma2, ref_sigma))
        print("  gz_s (and sigma) bitwise the relay's: " + ", ".join(f"{k} {v}" for k, v in checks.items()),
              flush=True)
        providers = {"sigma kernel": lambda: launch._sigma(z, gw, sigma, d),
                     "pointwise (relay)": lambda: pointwise(False),
                     "pointwise gz_s only": lambda: pointwise(True),
                     "merged sigma+gz_s 32r 2w": lambda: merged(32, 2),
                     "merged sigma+gz_s 64r 4w": lambda: merged(64, 4),
                     "merged sigma+gz_s 32r 4w": lambda: merged(32, 4)}
        for bm, bn, w in ((64, 64, 4), (64, 128, 4)):
            cfg = So2Config(bm, bn, cf, w, 2, precision=FP16X3, wgmma=True)
            for seg in (True, False):
                tag = f"M{bm} N{bn} {'m0' if seg else 'm1'}"
                providers[f"gluon fused pass {tag}"] = lambda cfg=cfg, seg=seg: gluon_pass(cfg, seg)
                providers[f"relay wgmma GEMM pass {tag}"] = lambda cfg=cfg, seg=seg: relay_pass(cfg, seg)
        layer = {}
        for bm, bn, w in ((64, 64, 4), (64, 128, 4)):
            relay = So2Config(bm, bn, cf, w, 2, precision=FP16X3, wgmma=True)
            fused = So2Config(bm, bn, cf, w, 2, fused=True, sigma_pass=True, precision=FP16X3, wgmma=True)
            layer[f"layer relay-wgmma M{bm} N{bn}"] = lambda c=relay: launch.relay_layer(
                g_cur, z, gw, w0t, w1t, out, sigma, gz, None, d, c)
            layer[f"layer fused-gluon M{bm} N{bn}"] = lambda c=fused: launch.fused_layer(
                g_cur, z, gw, w0t, w1t, out, d, c, sigma)
        outs = {}
        for name, fn in layer.items():
            out.fill_(float("nan"))
            fn()
            outs[name] = out.clone()
        base = outs["layer relay-wgmma M64 N64"]
        print("  layer outputs bitwise the relay's: " + ", ".join(f"{k} {torch.equal(v, base)}"
                                                                   for k, v in outs.items()), flush=True)
        del outs, base
        t = timing.interleaved({**providers, **layer}, graphs=True, rounds=5)
        for name, r in t.items():
            print(f"  {name:36s} {r.median_ms:8.3f} ms (spread {r.spread:.1%})", flush=True)
        del g_cur, z, out, sigma, sigma2, gz, gz_s, ref_gz, ref_sigma, providers, layer
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
