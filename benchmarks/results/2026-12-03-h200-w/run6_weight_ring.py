"""Run 6 (prepared, not run this stop): issue 15's level-3 GEMM (wgmma_kernels.so2_gemm3x_wgmma_kernel,
the backward GEMM pair) with its weight tiles prefetched further ahead.

Runs 3-4 put the wgmma GEMM's pace in its K walk, not its A bytes: the row-resident probe's
GEMM phase, A already in shared memory, took 1.75 ms at Neo, about the relay's GEMM pair. By
count its tensor work is about 0.4 ms there (20,219 row blocks x 26 K steps x six 64x64x16
HGMMA of 32 clocks, over 132 SMs), so each K step waits some 600 clocks on something else. The
shipped kernel issues K tile i + 1's weight tiles (head and tail, by TMA into a two-slot ring)
during step i, one short step before they are needed, from L2. Since 8bdb688 the ring has
So2Config.num_stages slots and tile i + num_stages - 1 is issued during step i (into the slot
step i - 1 read, free once every warp is past its wait); 2, every candidate's, is the schedule
before. This times 2, 3 and 4 at 64x64 and 64x128. Each slot is 8 KB
at 64x64 and Cf 32 (head and tail): four slots add 16 KB to the 33 KB a program holds, and the
kernel's 128 registers keep four programs an SM either way. The arithmetic is unchanged, so the
output must be bitwise the shipped kernel's (checked).

    PYTHONPATH=src python3 benchmarks/results/2026-12-03-h200-w/run6_weight_ring.py
"""

from __future__ import annotations

import sys

import torch


def main():
    from tilefuse.ops.so2_mixing_stack import launch
    from tilefuse.ops.so2_mixing_stack.configs import FP16X3, So2Config
    from tilefuse.ops.so2_mixing_stack.reference import So2Dims
    from tilefuse.tuning import timing
    F = 2
    print(f"# {torch.cuda.get_device_name()}; torch {torch.__version__}", flush=True)
    for E, lmax, cf in ((647000, 3, 32), (300000, 6, 32), (400000, 2, 64)):
        d = So2Dims(lmax, cf)
        g = torch.Generator(device="cuda").manual_seed(E)
        gz = torch.randn(F, E, d.row, generator=g, device="cuda")
        res = torch.randn(F, E, d.row, generator=g, device="cuda")
        out = torch.empty_like(gz)
        w0 = torch.randn(1, F, d.m0, d.m0, generator=g, device="cuda") * d.m0 ** -0.5
        w1 = torch.randn(1, F, d.m1, d.m1, generator=g, device="cuda") * d.m1 ** -0.5
        w0t = launch._layer(launch.split_fp16(w0.transpose(-1, -2)), 0)
        w1t = launch._layer(launch.split_fp16(w1.transpose(-1, -2)), 0)
        print(f"\n## E={E} lmax={lmax} Cf={cf}: the backward GEMM pair (both segments), ms", flush=True)
        providers, outs = {}, {}
        for bm, bn, warps in ((64, 64, 4), (64, 128, 4)):
            cfg = So2Config(bm, bn, cf, warps, 2, precision=FP16X3, wgmma=True)
            providers[f"shipped M{bm} N{bn} w{warps}"] = lambda cfg=cfg: launch._gemm_t(gz, w0t, w1t, res, out, d, cfg)
            for stages in (3, 4):
                deep = So2Config(bm, bn, cf, warps, stages, precision=FP16X3, wgmma=True)
                providers[f"ring{stages} M{bm} N{bn} w{warps}"] = \
                    lambda deep=deep: launch._gemm_t(gz, w0t, w1t, res, out, d, deep)
        for name, fn in providers.items():
            out.fill_(float("nan"))
            try:
                fn()
                torch.cuda.synchronize()
                outs[name] = out.clone()
            except Exception as exc:  # noqa: BLE001 - a probe: reported
                print(f"  {name}: {type(exc).__name__}: {str(exc)[:300]}", flush=True)
        providers = {k: v for k, v in providers.items() if k in outs}
        for name, o in outs.items():
            base = outs.get("shipped " + name.split(" ", 1)[1])   # the two-slot ring at the tile
            print(f"  {name:24s} bitwise the shipped kernel's at its tile: "
                  f"{base is not None and torch.equal(o, base)}", flush=True)
        del outs
        t = timing.interleaved(providers, graphs=True, rounds=7)
        for name, r in t.items():
            print(f"  {name:24s} {r.median_ms:8.3f} ms (spread {r.spread:.1%})", flush=True)
        del gz, res, out, providers
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
