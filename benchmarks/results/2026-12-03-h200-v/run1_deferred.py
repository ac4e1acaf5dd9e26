"""Run 1: issue 15's level-3 GEMM with the 3xfp16 products accumulated across all of K.

The shipped wgmma kernel (wgmma_kernels.so2_gemm3x_wgmma_kernel) scales each activation row per
K tile (a power of two of the tile's row maximum), so each K tile's three products must be
waited for, then rescaled and added to a float32 accumulator in registers: a max-reduction
(with shuffles), a 64 x BLOCK_N rescale and a wgmma wait every K tile. Nsight Compute
(2026-12-02-h200-u run 4) put that kernel at 50% of DRAM, 52% of SM issue, 7.4 warp cycles per
issued instruction on 4 warps a scheduler: neither memory nor issue is saturated.

Here (probe, BWD mode only) the row scale is one power of two for the row's whole K segment
(a pre-pass over the segment's tiles finds the row maximum), so the products accumulate in
the tensor cores across K, the head product a_hi w_hi in one float32 accumulator and the two
tail products (a_hi w_lo, a_lo w_hi) in another (as DeePMD-kit's fp16x3 does: chaining the
small tails into the head's accumulator loses them against the large partial sums), joined
once in the epilogue and scaled by the row and column scales. No rescale per K tile.

Variants (each BWD GEMM pair, both segments):
  deferred-sync:  one wait a K tile (the shipped kernel's ring, two slots).
  deferred-async: a K tile's products left in flight across the loop's back edge
                  (num_outstanding=3, a three-slot ring); ptxas reports whether it serialises.
  fixed-2^-4:     no pre-pass, DeePMD-kit's fixed 2^-4 activation scale (range-unsafe: a
                  bound on what the pre-pass costs, not a candidate).
Errors: normwise ||out - ref|| / ||ref - res|| against float64, next to the shipped kernel's
and cuBLAS fp32's (TF32 off) on the same inputs.

    PYTHONPATH=src python3 benchmarks/results/2026-12-03-h200-v/run1_deferred.py
"""

from __future__ import annotations

import sys

import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, warpgroup_mma, warpgroup_mma_wait

from tilefuse.ops.so2_mixing_stack.kernels import BWD
from tilefuse.ops.so2_mixing_stack.wgmma_kernels import (_a_layout, _column_scales, _cta_barrier, _epilogue,
                                                         _mma_layout, _pow2_scale, _tile_of, _tma_load)


@gluon.jit
def _w_tiles(wd, wlod, w_s, wlo_s, bars, w_row0, k_tile, n_k, w_col0, SLOTS: gl.constexpr, BLOCK_K: gl.constexpr,
             BLOCK_N: gl.constexpr):
    slot = k_tile % SLOTS
    ok = k_tile < n_k
    mbarrier.expect(bars.index(slot), 2 * BLOCK_K * BLOCK_N * 2, pred=ok)
    _tma_load(wd, [w_row0 + k_tile * BLOCK_K, w_col0], bars.index(slot), w_s.index(slot), pred=ok)
    _tma_load(wlod, [w_row0 + k_tile * BLOCK_K, w_col0], bars.index(slot), wlo_s.index(slot), pred=ok)


@gluon.jit
def deferred_kernel(a_ptr, wd, wlod, wscale_ptr, res_ptr, out_ptr, F, E, ROW, K_START, K_LEN, N_START, N_LEN,
                    w_rows, w_stride_k, FIXED: gl.constexpr, ASYNC: gl.constexpr,
                    BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr, num_warps: gl.constexpr):
    SLOTS: gl.constexpr = 3 if ASYNC else 2
    a_layout: gl.constexpr = _a_layout(BLOCK_N, num_warps)
    mma: gl.constexpr = _mma_layout(BLOCK_N, num_warps)
    w_s = gl.allocate_shared_memory(gl.float16, [SLOTS, BLOCK_K, BLOCK_N], wd.layout)
    wlo_s = gl.allocate_shared_memory(gl.float16, [SLOTS, BLOCK_K, BLOCK_N], wd.layout)
    bars = gl.allocate_shared_memory(gl.int64, [SLOTS, 1], mbarrier.MBarrierLayout())
    for s in gl.static_range(SLOTS):
        mbarrier.init(bars.index(s), count=1)
    focus, edge0, n0 = _tile_of(E, N_LEN, BLOCK_M, BLOCK_N)
    first = focus.to(gl.int64) * E + edge0
    n_k = K_LEN // BLOCK_K
    rows = gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, a_layout))
    kk = gl.arange(0, BLOCK_K, layout=gl.SliceLayout(0, a_layout))
    amask = ((edge0 + rows) < E)[:, None]
    a_base = a_ptr + first * ROW + K_START
    a_row = rows[:, None] * ROW
    inv_col = _column_scales(wscale_ptr, focus, w_stride_k, N_START, N_LEN, K_START, n0, BLOCK_N, num_warps)
    w_row0 = focus * w_rows
    w_col0 = N_START - K_START + n0
    _w_tiles(wd, wlod, w_s, wlo_s, bars, w_row0, 0, n_k, w_col0, SLOTS, BLOCK_K, BLOCK_N)
    if ASYNC:
        _w_tiles(wd, wlod, w_s, wlo_s, bars, w_row0, 1, n_k, w_col0, SLOTS, BLOCK_K, BLOCK_N)
    a = gl.load(a_base + (a_row + kk[None, :]), mask=amask, other=0.0)
    if FIXED:
        scale = gl.full([BLOCK_M], 0.0625, gl.float32, layout=gl.SliceLayout(1, a_layout))
        inv = gl.full([BLOCK_M], 16.0, gl.float32, layout=gl.SliceLayout(1, a_layout))
    else:
        # the row maxima over the whole K segment (tile i + 1 loaded while tile i is reduced)
        amax = gl.max(gl.abs(a), axis=1)
        t = gl.load(a_base + (a_row + (BLOCK_K + kk)[None, :]), mask=amask & (1 < n_k), other=0.0)
        for i in range(1, n_k):
            t_next = gl.load(a_base + (a_row + ((i + 1) * BLOCK_K + kk)[None, :]), mask=amask & (i + 1 < n_k),
                             other=0.0)
            amax = gl.maximum(amax, gl.max(gl.abs(t), axis=1))
            t = t_next
        scale, inv = _pow2_scale(amax)
    acc = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, layout=mma)
    acc2 = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, layout=mma)
    for i in range(n_k):
        a_next = gl.load(a_base + (a_row + ((i + 1) * BLOCK_K + kk)[None, :]), mask=amask & (i + 1 < n_k),
                         other=0.0)
        a_s = a * scale[:, None]
        a_hi = a_s.to(gl.float16)
        a_lo = (a_s - a_hi.to(gl.float32)).to(gl.float16)
        slot = i % SLOTS
        if not ASYNC:
            _cta_barrier()   # every warp is past tile i - 1's wait: slot (i + 1) % 2 is free
            _w_tiles(wd, wlod, w_s, wlo_s, bars, w_row0, i + 1, n_k, w_col0, SLOTS, BLOCK_K, BLOCK_N)
        mbarrier.wait(bars.index(slot), (i // SLOTS) & 1)
        acc = warpgroup_mma(a_hi, w_s.index(slot), acc, is_async=True)
        acc2 = warpgroup_mma(a_hi, wlo_s.index(slot), acc2, is_async=True)
        acc2 = warpgroup_mma(a_lo, w_s.index(slot), acc2, is_async=True)
        if ASYNC:
            acc, acc2 = warpgroup_mma_wait(num_outstanding=3, deps=[acc, acc2])   # tile i - 1's are done
            _cta_barrier()
            _w_tiles(wd, wlod, w_s, wlo_s, bars, w_row0, i + 2, n_k, w_col0, SLOTS, BLOCK_K, BLOCK_N)
        else:
            acc, acc2 = warpgroup_mma_wait(num_outstanding=0, deps=[acc, acc2])
        a = a_next
    acc, acc2 = warpgroup_mma_wait(num_outstanding=0, deps=[acc, acc2])
    for s in gl.static_range(SLOTS):
        mbarrier.invalidate(bars.index(s))
    y = ((acc + acc2) * inv_col[None, :]) * gl.convert_layout(inv, gl.SliceLayout(1, mma))[:, None]
    _epilogue(y, out_ptr, res_ptr, out_ptr, out_ptr, out_ptr, F, E, ROW, 0, 1, N_START, N_LEN, focus, edge0, n0,
              BWD, False, BLOCK_M, BLOCK_N, num_warps)


def deferred_pair(gz, w0t, w1t, res, out, d, block_m, block_n, warps, fixed, async_):
    from tilefuse.ops.so2_mixing_stack import wgmma_kernels
    F, E = gz.shape[0], gz.shape[1]
    for (w, w_lo, w_scale), start, length in ((w0t, 0, d.m0), (w1t, d.m0, d.m1)):
        descs = wgmma_kernels.descriptors(w, w_lo, d.focus_dim, block_n)
        grid = (F * -(-E // block_m) * -(-length // block_n),)
        deferred_kernel[grid](gz, *descs, w_scale, res, out, F, E, d.row, start, length, start, length, w.shape[1],
                              w_scale.stride(0), FIXED=fixed, ASYNC=async_, BLOCK_M=block_m, BLOCK_N=block_n,
                              BLOCK_K=d.focus_dim, num_warps=warps)


def main():
    from tilefuse.ops.so2_mixing_stack import launch
    from tilefuse.ops.so2_mixing_stack.configs import FP16X3, So2Config
    from tilefuse.ops.so2_mixing_stack.reference import So2Dims
    from tilefuse.tuning import timing
    torch.backends.cuda.matmul.allow_tf32 = False
    F = 2
    print(f"# {torch.cuda.get_device_name()}; torch {torch.__version__}", flush=True)
    shapes = [(647000, 3, 32), (300000, 6, 32), (400000, 2, 64)]
    for E, lmax, cf in shapes:
        d = So2Dims(lmax, cf)
        g = torch.Generator(device="cuda").manual_seed(E)
        gz = torch.randn(F, E, d.row, generator=g, device="cuda")
        res = torch.randn(F, E, d.row, generator=g, device="cuda")
        out = torch.empty_like(gz)
        w0 = torch.randn(F, d.m0, d.m0, generator=g, device="cuda") * d.m0 ** -0.5
        w1 = torch.randn(F, d.m1, d.m1, generator=g, device="cuda") * d.m1 ** -0.5
        w0t = launch._layer(launch.split_fp16(w0[None].transpose(-1, -2)), 0)
        w1t = launch._layer(launch.split_fp16(w1[None].transpose(-1, -2)), 0)
        # float64 reference product of the pair (res excluded)
        prod = torch.cat([gz[..., :d.m0].double() @ w0.double().transpose(-1, -2),
                          gz[..., d.m0:].double() @ w1.double().transpose(-1, -2)], dim=-1)
        pnorm = prod.norm().item()
        cublas = torch.cat([gz[..., :d.m0] @ w0.transpose(-1, -2), gz[..., d.m0:] @ w1.transpose(-1, -2)], dim=-1)
        print(f"\n## E={E} lmax={lmax} Cf={cf}: the backward GEMM pair (both segments)", flush=True)
        print(f"  cuBLAS fp32 (TF32 off) product error {((cublas.double() - prod).norm().item() / pnorm):.3e}",
              flush=True)
        del cublas
        providers = {}
        tiles = ((64, 64, 4), (64, 128, 4), (128, 64, 8))
        for bm, bn, warps in tiles:
            cfg = So2Config(bm, bn, cf, warps, 2, precision=FP16X3, wgmma=True)
            providers[f"shipped M{bm} N{bn} w{warps}"] = \
                lambda cfg=cfg: launch._gemm_t(gz, w0t, w1t, res, out, d, cfg)
            for tag, fixed, async_ in (("deferred-sync", False, False), ("deferred-async", False, True),
                                       ("fixed-2^-4", True, False)):
                providers[f"{tag} M{bm} N{bn} w{warps}"] = \
                    lambda bm=bm, bn=bn, warps=warps, fixed=fixed, async_=async_: \
                    deferred_pair(gz, w0t, w1t, res, out, d, bm, bn, warps, fixed, async_)
        ok = {}
        for name, fn in providers.items():
            out.fill_(float("nan"))
            try:
                fn()
                torch.cuda.synchronize()
            except Exception as exc:  # noqa: BLE001 - reported, then left out of the timing
                print(f"  {name}: {type(exc).__name__}: {str(exc)[:200]}", flush=True)
                continue
            err = ((out.double() - res.double() - prod).norm().item() / pnorm)
            finite = bool(torch.isfinite(out).all())
            print(f"  {name:34s} product error {err:.3e} finite {finite}", flush=True)
            ok[name] = fn
        del prod
        torch.cuda.empty_cache()
        t = timing.interleaved(ok, graphs=True, rounds=5)
        for name, r in t.items():
            print(f"  {name:34s} {r.median_ms:8.3f} ms (spread {r.spread:.1%})", flush=True)
        del gz, res, out, providers, ok
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
