"""Run 1 (GPU only): issue 15's fused level-3 backward layer in Gluon
(wgmma_kernels.so2_bwd_fused3x_wgmma_kernel, So2Config(fused, sigma_pass, 3xfp16, wgmma)) against
the wgmma relay the built-in table ships (sigma kernel, pointwise kernel, so2_gemm3x_wgmma_kernel)
and against the Triton fused kernel, one gated layer's backward at the level-3 Cf-32 shapes:
bitwise compared, timed interleaved (CUDA-graph replay, 5 rounds). Then torch.profiler's
per-kernel table of the whole level-3 step (forward + force backward) at Neo with the shipped
relay config and with the fused Gluon config at the same tile.

    PYTHONPATH=src python3 benchmarks/results/2026-12-02-h200-u/run1_fused_wgmma.py
"""

from __future__ import annotations

import collections
import sys

import torch


def layer_bench():
    from tilefuse.ops.so2_mixing_stack import launch
    from tilefuse.ops.so2_mixing_stack.configs import FP16X3, So2Config
    from tilefuse.ops.so2_mixing_stack.reference import So2Dims
    from tilefuse.tuning import timing
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
        gz = torch.empty_like(g_cur)
        print(f"\n## one gated layer's backward, E={E} lmax={lmax} Cf={cf}", flush=True)
        providers, results = {}, {}
        cases = [("relay-wgmma", bm, bn, w, False, True) for bm, bn, w in ((64, 64, 4), (64, 128, 4))]
        cases += [("fused-gluon", bm, bn, w, True, True) for bm, bn, w in ((64, 64, 4), (64, 128, 4), (128, 64, 8),
                                                                           (128, 128, 8))]
        cases += [("fused-triton", 64, 64, 4, True, False)]
        for name, bm, bn, w, fused, wgmma in cases:
            cfg = So2Config(bm, bn, cf, w, 2, fused=fused, sigma_pass=fused, precision=FP16X3, wgmma=wgmma)
            if fused:
                fn = lambda cfg=cfg: launch.fused_layer(g_cur, z, gw, w0t, w1t, out, d, cfg, sigma)  # noqa: E731
            else:
                fn = lambda cfg=cfg: launch.relay_layer(g_cur, z, gw, w0t, w1t, out, sigma, gz, None, d, cfg)  # noqa
            label = f"{name} M{bm} N{bn} w{w}"
            out.fill_(float("nan"))
            fn()
            results[label] = out.clone()
            providers[label] = fn
        base = results["relay-wgmma M64 N64 w4"]
        for label, r in results.items():
            print(f"  {label:28s} bitwise equal to relay-wgmma M64 N64 w4: {torch.equal(r, base)}; "
                  f"finite {bool(r.isfinite().all())}", flush=True)
        del results
        t = timing.interleaved(providers, graphs=True, rounds=5)
        ref = t["relay-wgmma M64 N64 w4"]
        for label, r in t.items():
            print(f"  {label:28s} {r.median_ms:8.3f} ms (spread {r.spread:.1%})  x{timing.ratio(ref, r):.3f} "
                  f"vs relay-wgmma M64 N64 w4", flush=True)
        del g_cur, z, out, sigma, gz, providers
        torch.cuda.empty_cache()


def profile_step():
    from torch.profiler import ProfilerActivity, profile
    from tilefuse.ops.so2_mixing_stack import launch
    from tilefuse.ops.so2_mixing_stack.configs import FP16X3, So2Config
    from tilefuse.ops.so2_mixing_stack.reference import So2Dims
    E, lmax, cf, F, NL = 647000, 3, 32, 2, 3
    d = So2Dims(lmax, cf)
    g = torch.Generator(device="cuda").manual_seed(1)
    u0 = torch.randn(F, E, d.row, generator=g, device="cuda") * 0.5
    alpha = torch.rand(E, F, generator=g, device="cuda") + 0.2
    w0 = torch.randn(NL, F, d.m0, d.m0, generator=g, device="cuda") * d.m0 ** -0.5
    w1 = torch.randn(NL, F, d.m1, d.m1, generator=g, device="cuda") * d.m1 ** -0.5
    gw = torch.randn(NL - 1, F, cf, d.lg, generator=g, device="cuda") * cf ** -0.5
    grad_out = torch.randn(E, F, d.row, generator=g, device="cuda")
    for name, cfg in (("relay-wgmma M64 N64 w4 (shipped)", So2Config(64, 64, 32, 4, 2, precision=FP16X3, wgmma=True)),
                      ("fused-gluon M64 N64 w4", So2Config(64, 64, 32, 4, 2, fused=True, sigma_pass=True,
                                                           precision=FP16X3, wgmma=True))):
        def step():
            fwd = launch.forward(u0, alpha, w0, w1, gw, d, True, config=cfg)
            return launch.backward(grad_out, *fwd, alpha, w0, w1, gw, d, True, False, config=cfg)
        for _ in range(2):
            step()
        torch.cuda.synchronize()
        steps = 3
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(steps):
                step()
            torch.cuda.synchronize()
        per = collections.defaultdict(lambda: [0.0, 0])
        for ev in prof.events():
            if ev.device_type.name == "CUDA":
                key = ev.name.split("(")[0][:60]
                per[key][0] += ev.device_time_total if hasattr(ev, "device_time_total") else ev.cuda_time_total
                per[key][1] += 1
        total = sum(v[0] for v in per.values()) / steps
        print(f"\n## profile at Neo, level 3, {name}: kernel time per fwd+bwd {total / 1e3:.3f} ms", flush=True)
        for key, (us, n) in sorted(per.items(), key=lambda kv: -kv[1][0]):
            print(f"  {key:60s} {us / steps / 1e3:8.3f} ms  {n // steps:3d} launches", flush=True)


def main():
    print(f"# {torch.cuda.get_device_name()}; torch {torch.__version__}", flush=True)
    layer_bench()
    profile_step()
    return 0


if __name__ == "__main__":
    sys.exit(main())
