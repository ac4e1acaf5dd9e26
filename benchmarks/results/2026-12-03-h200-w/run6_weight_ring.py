"""Run 6 (prepared, not run this stop): issue 15's level-3 GEMM (wgmma_kernels.so2_gemm3x_wgmma_kernel,
BWD mode) with its weight tiles prefetched further ahead.

Runs 3-4 put the wgmma GEMM's pace in its K walk, not its A bytes: the row-resident probe's
GEMM phase, A already in shared memory, took 1.75 ms at Neo, about the relay's GEMM pair. By
count its tensor work is about 0.4 ms there (20,219 row blocks x 26 K steps x six 64x64x16
HGMMA of 32 clocks, over 132 SMs), so each K step waits some 600 clocks on something else. The
shipped kernel issues K tile i + 1's weight tiles (head and tail, by TMA into a two-slot ring)
during step i, one short step before they are needed, from L2. Here the ring has W_STAGES slots
and tile i + W_STAGES - 1 is issued during step i (into the slot step i - 1 read, free once
every warp is past its wait); W_STAGES = 2 is the shipped kernel's schedule. Each slot is 8 KB
at 64x64 and Cf 32 (head and tail): four slots add 16 KB to the 33 KB a program holds, and the
kernel's 128 registers keep four programs an SM either way. The arithmetic is unchanged, so the
output must be bitwise the shipped kernel's (checked).

    PYTHONPATH=src python3 benchmarks/results/2026-12-03-h200-w/run6_weight_ring.py
"""

from __future__ import annotations

import sys

import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, warpgroup_mma, warpgroup_mma_wait

from tilefuse.ops.so2_mixing_stack import wgmma_kernels as W
from tilefuse.ops.so2_mixing_stack.kernels import BWD
from tilefuse.ops.so2_mixing_stack.wgmma_kernels import (A_STAGES, _a_layout, _a_tile, _column_scales, _cta_barrier,
                                                         _epilogue, _mma_layout, _pow2_scale, _tile_of, _tma_load)


@gluon.jit
def _w_tile(wd, wlod, w_s, wlo_s, bars, w_row0, k_tile, n_k, w_col0, W_STAGES: gl.constexpr, BLOCK_K: gl.constexpr,
            BLOCK_N: gl.constexpr):
    """TMA: K tile ``k_tile``'s weight head and tail tiles into ring slot k_tile % W_STAGES, if
    k_tile < n_k."""
    slot = k_tile % W_STAGES
    ok = k_tile < n_k
    mbarrier.expect(bars.index(slot), 2 * BLOCK_K * BLOCK_N * 2, pred=ok)
    _tma_load(wd, [w_row0 + k_tile * BLOCK_K, w_col0], bars.index(slot), w_s.index(slot), pred=ok)
    _tma_load(wlod, [w_row0 + k_tile * BLOCK_K, w_col0], bars.index(slot), wlo_s.index(slot), pred=ok)


@gluon.jit
def gemm3x_wring_kernel(ad, wd, wlod, wscale_ptr, res_ptr, out_ptr, F, E, ROW, K_START, K_LEN, N_START, N_LEN,
                        w_rows, w_stride_k, W_STAGES: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                        BLOCK_K: gl.constexpr, num_warps: gl.constexpr):
    a_layout: gl.constexpr = _a_layout(BLOCK_N, num_warps)
    mma: gl.constexpr = _mma_layout(BLOCK_N, num_warps)
    w_s = gl.allocate_shared_memory(gl.float16, [W_STAGES, BLOCK_K, BLOCK_N], wd.layout)
    wlo_s = gl.allocate_shared_memory(gl.float16, [W_STAGES, BLOCK_K, BLOCK_N], wd.layout)
    bars = gl.allocate_shared_memory(gl.int64, [W_STAGES, 1], mbarrier.MBarrierLayout())
    for s in gl.static_range(W_STAGES):
        mbarrier.init(bars.index(s), count=1)
    a_s = gl.allocate_shared_memory(gl.float32, [A_STAGES, BLOCK_M, BLOCK_K], ad.layout)
    a_bars = gl.allocate_shared_memory(gl.int64, [A_STAGES, 1], mbarrier.MBarrierLayout())
    for s in gl.static_range(A_STAGES):
        mbarrier.init(a_bars.index(s), count=1)
    focus, edge0, n0 = _tile_of(E, N_LEN, BLOCK_M, BLOCK_N)
    n_k = K_LEN // BLOCK_K
    a_row0 = (focus.to(gl.int64) * E + edge0).to(gl.int32)
    a_col0 = K_START
    for s in gl.static_range(A_STAGES):
        _a_tile(ad, a_s, a_bars, a_row0, a_col0, s, n_k, A_STAGES, BLOCK_M, BLOCK_K)
    inv_col = _column_scales(wscale_ptr, focus, w_stride_k, N_START, N_LEN, K_START, n0, BLOCK_N, num_warps)
    w_row0 = focus * w_rows
    w_col0 = N_START - K_START + n0
    acc = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, layout=mma)
    p = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, layout=mma)
    for s in gl.static_range(W_STAGES - 1):
        _w_tile(wd, wlod, w_s, wlo_s, bars, w_row0, s, n_k, w_col0, W_STAGES, BLOCK_K, BLOCK_N)
    for i in range(n_k):
        slot_a = i % A_STAGES
        mbarrier.wait(a_bars.index(slot_a), (i // A_STAGES) & 1)
        a = a_s.index(slot_a).load(a_layout)
        # kernels.tile_product's 3xfp16 step, as wgmma_kernels._k_step
        scale, inv = _pow2_scale(gl.max(gl.abs(a), axis=1))
        a_sc = a * scale[:, None]
        a_hi = a_sc.to(gl.float16)
        a_lo = (a_sc - a_hi.to(gl.float32)).to(gl.float16)
        slot = i % W_STAGES
        # every warp is past step i - 1's wait and has read A slot i: the weight slot step i - 1
        # read takes tile i + W_STAGES - 1, the A slot tile i + A_STAGES
        _cta_barrier()
        _w_tile(wd, wlod, w_s, wlo_s, bars, w_row0, i + W_STAGES - 1, n_k, w_col0, W_STAGES, BLOCK_K, BLOCK_N)
        mbarrier.wait(bars.index(slot), (i // W_STAGES) & 1)
        part = warpgroup_mma(a_lo, w_s.index(slot), p, use_acc=False, is_async=True)
        part = warpgroup_mma(a_hi, wlo_s.index(slot), part, is_async=True)
        part = warpgroup_mma(a_hi, w_s.index(slot), part, is_async=True)
        p = warpgroup_mma_wait(num_outstanding=0, deps=[part])
        acc += (p * inv_col[None, :]) * gl.convert_layout(inv, gl.SliceLayout(1, mma))[:, None]
        _a_tile(ad, a_s, a_bars, a_row0, a_col0, i + A_STAGES, n_k, A_STAGES, BLOCK_M, BLOCK_K)
    for s in gl.static_range(W_STAGES):
        mbarrier.invalidate(bars.index(s))
    for s in gl.static_range(A_STAGES):
        mbarrier.invalidate(a_bars.index(s))
    _epilogue(acc, out_ptr, res_ptr, out_ptr, out_ptr, out_ptr, F, E, ROW, 0, 1, N_START, N_LEN, focus,
              edge0, n0, BWD, False, BLOCK_M, BLOCK_N, num_warps)


def wring_pair(gz, w0t, w1t, res, out, d, bm, bn, warps, stages):
    """The backward GEMM pair (both segments) through gemm3x_wring_kernel."""
    F, E = gz.shape[0], gz.shape[1]
    ad = W.activation_descriptor(gz, False, bm, d.focus_dim)
    for (w, w_lo, w_scale), k_start, k_len in ((w0t, 0, d.m0), (w1t, d.m0, d.m1)):
        descs = W.descriptors(w, w_lo, d.focus_dim, bn)
        grid = (F * -(-E // bm) * -(-k_len // bn),)
        gemm3x_wring_kernel[grid](ad, *descs, w_scale, res, out, F, E, d.row, k_start, k_len, k_start, k_len,
                                  w.shape[1], w_scale.stride(0), W_STAGES=stages, BLOCK_M=bm, BLOCK_N=bn,
                                  BLOCK_K=d.focus_dim, num_warps=warps)


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
            for stages in (2, 3, 4):
                providers[f"ring{stages} M{bm} N{bn} w{warps}"] = \
                    lambda bm=bm, bn=bn, warps=warps, stages=stages: \
                    wring_pair(gz, w0t, w1t, res, out, d, bm, bn, warps, stages)
            for stages in (3, 4):   # the product kernel's ring at that depth (So2Config.num_stages, since 2026-12-03)
                pcfg = So2Config(bm, bn, cf, warps, stages, precision=FP16X3, wgmma=True)
                providers[f"product-s{stages} M{bm} N{bn} w{warps}"] = \
                    lambda pcfg=pcfg: launch._gemm_t(gz, w0t, w1t, res, out, d, pcfg)
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
            base = outs.get("shipped " + name.split(" ", 1)[1])   # the shipped two-slot kernel at the tile
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
