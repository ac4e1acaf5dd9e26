"""Run 1: issue 15's relay backward with the gate's sigma recomputed inside the pointwise kernel
(so2_bwd_pointwise_kernel SIGMA_LOADED=False, what launch.relay_layer now runs) against the
sigma kernel writing the (F, E, LG) sigma surface and the pointwise kernel reading it (the
relay until this run). Per benchmark shape: one gated layer's z from the real forward, a
random upstream gradient; gz and gq compared bitwise (every element, NaN-poisoned outputs);
then both forms timed interleaved under CUDA-graph replay, with a copy of one (F, E, ROW)
surface as the bandwidth reference.

    PYTHONPATH=src python3 benchmarks/results/2026-12-03-h200-w/run1_sigma_merge.py
"""

from __future__ import annotations

import torch

from tilefuse.check.so2 import _inputs
from tilefuse.ops.so2_mixing_stack import configs, launch
from tilefuse.ops.so2_mixing_stack.kernels import so2_bwd_pointwise_kernel
from tilefuse.tuning.timing import interleaved

SHAPES = ((647000, 3, 32), (300000, 6, 32), (400000, 2, 64))


def pointwise(g, z, sigma, gw, gz, gq, d, loaded):
    F, E = g.shape[0], g.shape[1]
    so2_bwd_pointwise_kernel[(F * -(-E // launch.POINTWISE_BLOCK_M),)](
        g, z, sigma, gw, gz, gq, E, d.row, d.m0, d.lg, d.focus_dim, WRITE_GQ=True, SIGMA_LOADED=loaded,
        IEEE=True, BLOCK_M=launch.POINTWISE_BLOCK_M, CF_P=configs.cf_padded(d.focus_dim),
        num_warps=launch.POINTWISE_WARPS, num_stages=1)


def main():
    print(torch.cuda.get_device_name(), torch.__version__)
    print("| shape | sigma kernel + pointwise (ms) | pointwise, sigma recomputed (ms) | speedup | gz, gq bitwise |"
          " copy of one surface (ms) |")
    print("|---|---|---|---|---|---|")
    for E, lmax, cf in SHAPES:
        torch.manual_seed(E)
        d, ins = _inputs(lmax, 2, cf, E, "cuda")
        u0, alpha, w0, w1, gw = (t.detach() for t in ins)
        with torch.no_grad():
            _, z_all, _ = launch.forward(u0, alpha, w0, w1, gw, d, True)
        z, gwc = z_all[0], gw[0].contiguous()
        del u0, ins
        g = torch.randn_like(z)
        outs = {}
        for loaded in (True, False):
            sigma = torch.full((2, E, d.lg), float("nan"), device="cuda")
            gz, gq = torch.full_like(g, float("nan")), torch.full((2, E, d.lg), float("nan"), device="cuda")
            if loaded:
                launch._sigma(z, gwc, sigma, d)
            pointwise(g, z, sigma, gwc, gz, gq, d, loaded)
            outs[loaded] = (gz, gq)
        same = all(torch.equal(a, b) for a, b in zip(outs[True], outs[False]))
        finite = all(bool(torch.isfinite(t).all()) for t in outs[False])
        sigma = torch.empty((2, E, d.lg), device="cuda")
        gz, gq = outs[True]
        copy_dst = torch.empty_like(g)

        def two():
            launch._sigma(z, gwc, sigma, d)
            pointwise(g, z, sigma, gwc, gz, gq, d, True)

        t = interleaved({"two": two, "one": lambda: pointwise(g, z, sigma, gwc, gz, gq, d, False),
                         "copy": lambda: copy_dst.copy_(g)}, rounds=10, graphs=True)
        print(f"| ({E}, {lmax}, {cf}) | {t['two'].median_ms:.3f} [{t['two'].min_ms:.3f}-{t['two'].max_ms:.3f}] "
              f"| {t['one'].median_ms:.3f} [{t['one'].min_ms:.3f}-{t['one'].max_ms:.3f}] | {t['two'].median_ms / t['one'].median_ms:.3f}x "
              f"| {same and finite} | {t['copy'].median_ms:.3f} |", flush=True)
        del z_all, z, g, outs, sigma, gz, gq, copy_dst
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
