"""Run 5 (GPU only): issue 15's level-3 (3xfp16) layer GEMM in Gluon with the three wgmma of a
K tile issued back to back and one wait a K tile, against so2_gemm_kernel's 3xfp16 (BWD mode),
which waits after each wgmma (kernels.tile_product).

2026-12-02-h200-q run 6 tried this and measured 0.77-1.01x. Its kernel carried the in-flight
products across the K loop's back edge (waited for at the top of the next iteration), and ptxas
serialises every wgmma of such a loop: `ptxas -v` on its PTX (triton 3.6) reports "(C7515)
Potential Performance Loss: wgmma.mma_async instructions are serialized due to non wgmma
instructions defining accumulator registers of a wgmma between start and end of the pipeline
stage", and its SASS waits (WARPGROUP.DEPBAR 0) after every wgmma, as Triton's does. So that
run measured the same serialised chain, not the lever.

Here (gemm3x_gluon) no unfinished product crosses the back edge: each iteration issues the next
K tile's global loads, splits this tile into float16 head and tail, stores them to a
double-buffered shared-memory pair, issues the three wgmma, waits once, and joins the products
to the float32 accumulator as kernels.tile_product does, column scale then row scale, so the
result is so2_gemm_kernel's bit for bit (checked here). The SASS of its loop: one
WARPGROUP.ARRIVE and one WARPGROUP.DEPBAR a K tile (checked on the CPU, triton 3.6 and 3.8).

gemm3x_gluon_tma: the same with the weight tiles through TMA (no registers hold them or their
addresses: 135 registers at 64x64, none of the tiles here spills; gemm3x_gluon spills at 64x128
and at BLOCK_K 64).

Per shape: the backward pair (m = 0 and |m| = 1 segments of one layer) of all three at the level-3
keys' tiles and beside them, bitwise compared, their normwise error against float64 on the
first 2**16 edges, and the time (timing.interleaved, CUDA-graph replay, 5 rounds). Gluon
kernels do not run in Triton's interpreter, so this is GPU only.

    PYTHONPATH=src python3 benchmarks/results/2026-12-02-h200-t/run5_gluon_3xfp16.py
"""

from __future__ import annotations

import sys

import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma, warpgroup_mma,
                                                             warpgroup_mma_init, warpgroup_mma_wait)

_tma_load = tma.async_load if hasattr(tma, "async_load") else tma.async_copy_global_to_shared


# Gluon is experimental: triton 3.6 names the CTA barrier thread_barrier, 3.8 barrier.
_cta_barrier = gl.thread_barrier if hasattr(gl, "thread_barrier") else gl.barrier


@gluon.jit
def _pow2_scale(amax):
    exponent = (amax.to(gl.int32, bitcast=True) >> 23) & 0xFF
    biased = gl.minimum(gl.maximum(268 - exponent, 1), 253)
    return (biased << 23).to(gl.float32, bitcast=True), ((254 - biased) << 23).to(gl.float32, bitcast=True)


@gluon.jit
def _tiles(a_base, w_ptr, wlo_ptr, w_base, rows, kk, wk, wn, amask_r, k0, ROW, K_START, K_LEN, N_START, N_LEN,
           w_stride_k):
    """The activation tile (float32) and the weight head and tail tiles of K tile k0."""
    k = k0 + kk
    a = gl.load(a_base + (rows[:, None] * ROW + (K_START + k)[None, :]),
                mask=amask_r[:, None] & (k < K_LEN)[None, :], other=0.0)
    w_offs = w_base + (k0 + wk)[:, None] * w_stride_k + (wn - K_START)[None, :]
    wmask = ((k0 + wk) < K_LEN)[:, None] & (wn < N_START + N_LEN)[None, :]
    return a, gl.load(w_ptr + w_offs, mask=wmask, other=0.0), gl.load(wlo_ptr + w_offs, mask=wmask, other=0.0)


@gluon.jit
def gemm3x_gluon(a_ptr, w_ptr, wlo_ptr, wscale_ptr, res_ptr, out_ptr, E, ROW, K_START, K_LEN, N_START, N_LEN,
                 w_focus_stride, w_stride_k, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr,
                 num_warps: gl.constexpr):
    ablk: gl.constexpr = gl.BlockedLayout([1, 4], [4, 8], [num_warps, 1], [1, 0])
    wblk: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [num_warps, 1], [1, 0])
    oblk: gl.constexpr = gl.BlockedLayout([1, 4], [2, 16], [num_warps, 1], [1, 0])
    mma: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                  instr_shape=[16, BLOCK_N, 16])
    a_sl: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_M, BLOCK_K], gl.float16)
    w_sl: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_K, BLOCK_N], gl.float16)
    a_hi_s = gl.allocate_shared_memory(gl.float16, [2, BLOCK_M, BLOCK_K], a_sl)
    a_lo_s = gl.allocate_shared_memory(gl.float16, [2, BLOCK_M, BLOCK_K], a_sl)
    w_s = gl.allocate_shared_memory(gl.float16, [2, BLOCK_K, BLOCK_N], w_sl)
    wlo_s = gl.allocate_shared_memory(gl.float16, [2, BLOCK_K, BLOCK_N], w_sl)

    pid = gl.program_id(0)
    n_tiles = gl.cdiv(N_LEN, BLOCK_N)
    n_row_blocks = gl.cdiv(E, BLOCK_M)
    rb = pid // n_tiles
    focus = rb // n_row_blocks
    edge0 = (rb % n_row_blocks).to(gl.int64) * BLOCK_M
    n0 = (pid % n_tiles) * BLOCK_N
    first = focus.to(gl.int64) * E + edge0

    rows = gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, ablk))
    kk = gl.arange(0, BLOCK_K, layout=gl.SliceLayout(0, ablk))
    amask_r = (edge0 + rows) < E
    a_base = a_ptr + first * ROW
    wk = gl.arange(0, BLOCK_K, layout=gl.SliceLayout(1, wblk))
    wn = N_START + n0 + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, wblk))
    w_base = focus.to(gl.int64) * w_focus_stride

    # the column scales once, in the accumulator's column layout (loaded one per thread first)
    cvec: gl.constexpr = gl.BlockedLayout([1], [32], [num_warps], [0])
    cn = N_START + n0 + gl.arange(0, BLOCK_N, layout=cvec)
    inv_col = gl.convert_layout(gl.load(wscale_ptr + focus.to(gl.int64) * w_stride_k + (cn - K_START),
                                        mask=cn < N_START + N_LEN, other=0.0), gl.SliceLayout(0, mma))
    acc = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, layout=mma)
    # the first wgmma's accumulator operand (ignored: use_acc=False): the last K tile's waited
    # products, whose registers are free by then (a separate zero tile costs registers)
    p = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, layout=mma)
    a, w, w_lo = _tiles(a_base, w_ptr, wlo_ptr, w_base, rows, kk, wk, wn, amask_r, 0, ROW, K_START, K_LEN,
                        N_START, N_LEN, w_stride_k)
    i = 0
    for k0 in range(0, K_LEN, BLOCK_K):
        # the next K tile's loads first (masked off past K_LEN): in flight while this one is
        # split, stored and multiplied
        a_next, w_next, wlo_next = _tiles(a_base, w_ptr, wlo_ptr, w_base, rows, kk, wk, wn, amask_r, k0 + BLOCK_K,
                                          ROW, K_START, K_LEN, N_START, N_LEN, w_stride_k)
        scale, inv = _pow2_scale(gl.max(gl.abs(a), axis=1))
        a_s = a * scale[:, None]
        a_hi = a_s.to(gl.float16)
        a_lo = (a_s - a_hi.to(gl.float32)).to(gl.float16)
        buf = i % 2
        a_hi_s.index(buf).store(a_hi)
        a_lo_s.index(buf).store(a_lo)
        w_s.index(buf).store(w)
        wlo_s.index(buf).store(w_lo)
        fence_async_shared()
        _cta_barrier()
        # the three products, small ones first, from a zero accumulator; one wait
        part = warpgroup_mma(a_lo_s.index(buf), w_s.index(buf), p, use_acc=False, is_async=True)
        part = warpgroup_mma(a_hi_s.index(buf), wlo_s.index(buf), part, is_async=True)
        part = warpgroup_mma(a_hi_s.index(buf), w_s.index(buf), part, is_async=True)
        p = warpgroup_mma_wait(num_outstanding=0, deps=[part])
        acc += (p * inv_col[None, :]) * gl.convert_layout(inv, gl.SliceLayout(1, mma))[:, None]
        a, w, w_lo = a_next, w_next, wlo_next
        i += 1
    on = N_START + n0 + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, oblk))
    orow = gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, oblk))
    nmask = on < N_START + N_LEN
    out = gl.convert_layout(acc, oblk)
    mask = ((edge0 + orow) < E)[:, None] & nmask[None, :]
    offs = orow[:, None] * ROW + on[None, :]
    res = gl.load((res_ptr + first * ROW) + offs, mask=mask, other=0.0)
    gl.store((out_ptr + first * ROW) + offs, res + out, mask=mask)


@gluon.jit
def _w_tiles(wd, wlod, w_s, wlo_s, bars, focus, K_LEN, k_tile, n_k, n0, BLOCK_K: gl.constexpr, BLOCK_N: gl.constexpr):
    """TMA: K tile k_tile's weight head and tail tiles into ring slot k_tile % 2 (if k_tile < n_k)."""
    slot = k_tile % 2
    ok = k_tile < n_k
    mbarrier.expect(bars.index(slot), 2 * BLOCK_K * BLOCK_N * 2, pred=ok)
    row = focus * K_LEN + k_tile * BLOCK_K
    _tma_load(wd, [row, n0], bars.index(slot), w_s.index(slot), pred=ok)
    _tma_load(wlod, [row, n0], bars.index(slot), wlo_s.index(slot), pred=ok)


@gluon.jit
def gemm3x_gluon_tma(a_ptr, wd, wlod, wscale_ptr, res_ptr, out_ptr, E, ROW, K_START, K_LEN, N_START, N_LEN,
                     w_stride_k, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr,
                     num_warps: gl.constexpr):
    """gemm3x_gluon with the weight head and tail tiles through TMA (2-D descriptors over the
    (F * K_LEN, N_LEN) weights, tiles [BLOCK_K, BLOCK_N]; K_LEN a multiple of BLOCK_K) straight
    into the shared-memory ring: no registers hold them or their addresses (gemm3x_gluon spills
    at 64x128 and at BLOCK_K 64). The activation tile still goes through registers (it is
    split there)."""
    ablk: gl.constexpr = gl.BlockedLayout([1, 4], [4, 8], [num_warps, 1], [1, 0])
    oblk: gl.constexpr = gl.BlockedLayout([1, 4], [2, 16], [num_warps, 1], [1, 0])
    mma: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                  instr_shape=[16, BLOCK_N, 16])
    a_sl: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_M, BLOCK_K], gl.float16)
    a_hi_s = gl.allocate_shared_memory(gl.float16, [2, BLOCK_M, BLOCK_K], a_sl)
    a_lo_s = gl.allocate_shared_memory(gl.float16, [2, BLOCK_M, BLOCK_K], a_sl)
    w_s = gl.allocate_shared_memory(gl.float16, [2, BLOCK_K, BLOCK_N], wd.layout)
    wlo_s = gl.allocate_shared_memory(gl.float16, [2, BLOCK_K, BLOCK_N], wlod.layout)
    bars = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    mbarrier.init(bars.index(0), count=1)
    mbarrier.init(bars.index(1), count=1)

    pid = gl.program_id(0)
    n_tiles = gl.cdiv(N_LEN, BLOCK_N)
    n_row_blocks = gl.cdiv(E, BLOCK_M)
    rb = pid // n_tiles
    focus = rb // n_row_blocks
    edge0 = (rb % n_row_blocks).to(gl.int64) * BLOCK_M
    n0 = (pid % n_tiles) * BLOCK_N
    first = focus.to(gl.int64) * E + edge0
    n_k = K_LEN // BLOCK_K

    rows = gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, ablk))
    kk = gl.arange(0, BLOCK_K, layout=gl.SliceLayout(0, ablk))
    amask = ((edge0 + rows) < E)[:, None]
    a_base = a_ptr + first * ROW + K_START
    cvec: gl.constexpr = gl.BlockedLayout([1], [32], [num_warps], [0])
    cn = N_START + n0 + gl.arange(0, BLOCK_N, layout=cvec)
    inv_col = gl.convert_layout(gl.load(wscale_ptr + focus.to(gl.int64) * w_stride_k + (cn - K_START),
                                        mask=cn < N_START + N_LEN, other=0.0), gl.SliceLayout(0, mma))
    acc = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, layout=mma)
    p = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, layout=mma)
    _w_tiles(wd, wlod, w_s, wlo_s, bars, focus, K_LEN, 0, n_k, n0, BLOCK_K, BLOCK_N)
    a = gl.load(a_base + (rows[:, None] * ROW + kk[None, :]), mask=amask, other=0.0)
    for i in range(n_k):
        # the next K tile's activation loads first (masked off past the last tile)
        a_next = gl.load(a_base + (rows[:, None] * ROW + ((i + 1) * BLOCK_K + kk)[None, :]),
                         mask=amask & (i + 1 < n_k), other=0.0)
        scale, inv = _pow2_scale(gl.max(gl.abs(a), axis=1))
        a_s = a * scale[:, None]
        a_hi = a_s.to(gl.float16)
        a_lo = (a_s - a_hi.to(gl.float32)).to(gl.float16)
        slot = i % 2
        a_hi_s.index(slot).store(a_hi)
        a_lo_s.index(slot).store(a_lo)
        fence_async_shared()
        _cta_barrier()
        # every warp is past the last tile's wait, so slot (i + 1) % 2 is free for its weights
        _w_tiles(wd, wlod, w_s, wlo_s, bars, focus, K_LEN, i + 1, n_k, n0, BLOCK_K, BLOCK_N)
        mbarrier.wait(bars.index(slot), (i // 2) & 1)
        part = warpgroup_mma(a_lo_s.index(slot), w_s.index(slot), p, use_acc=False, is_async=True)
        part = warpgroup_mma(a_hi_s.index(slot), wlo_s.index(slot), part, is_async=True)
        part = warpgroup_mma(a_hi_s.index(slot), w_s.index(slot), part, is_async=True)
        p = warpgroup_mma_wait(num_outstanding=0, deps=[part])
        acc += (p * inv_col[None, :]) * gl.convert_layout(inv, gl.SliceLayout(1, mma))[:, None]
        a = a_next
    mbarrier.invalidate(bars.index(0))
    mbarrier.invalidate(bars.index(1))
    on = N_START + n0 + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, oblk))
    orow = gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, oblk))
    mask = ((edge0 + orow) < E)[:, None] & (on < N_START + N_LEN)[None, :]
    offs = orow[:, None] * ROW + on[None, :]
    res = gl.load((res_ptr + first * ROW) + offs, mask=mask, other=0.0)
    gl.store((out_ptr + first * ROW) + offs, res + gl.convert_layout(acc, oblk), mask=mask)


def gluon_tma_pair(a, w0t, w1t, res, out, d, block_m, block_n, warps):
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor as GluonDesc
    layout = gl.NVMMASharedLayout.get_default_for([d.focus_dim, block_n], gl.float16)
    calls = []
    for (w, w_lo, w_scale), k_start, k_len in ((w0t, 0, d.m0), (w1t, d.m0, d.m1)):
        assert w.is_contiguous() and w_lo.is_contiguous() and k_len % d.focus_dim == 0
        n_focus, n_edges = w.shape[0], a.shape[1]
        wd = GluonDesc.from_tensor(w.view(-1, w.shape[-1]), [d.focus_dim, block_n], layout)
        wlod = GluonDesc.from_tensor(w_lo.view(-1, w.shape[-1]), [d.focus_dim, block_n], layout)
        grid = (n_focus * -(-n_edges // block_m) * -(-k_len // block_n),)
        calls.append((grid, wd, wlod, w_scale, n_edges, k_start, k_len, w.stride(1)))

    def run():
        for grid, wd, wlod, w_scale, n_edges, k_start, k_len, stride_k in calls:
            gemm3x_gluon_tma[grid](a, wd, wlod, w_scale, res, out, n_edges, d.row, k_start, k_len, k_start, k_len,
                                   stride_k, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=d.focus_dim, num_warps=warps)
    return run


def gluon_pair(a, w0t, w1t, res, out, d, block_m, block_n, warps):
    for (w, w_lo, w_scale), k_start, k_len in ((w0t, 0, d.m0), (w1t, d.m0, d.m1)):
        n_focus, n_edges = w.shape[0], a.shape[1]
        grid = (n_focus * -(-n_edges // block_m) * -(-k_len // block_n),)
        gemm3x_gluon[grid](a, w, w_lo, w_scale, res, out, n_edges, d.row, k_start, k_len, k_start, k_len,
                           w.stride(0), w.stride(1), BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=d.focus_dim,
                           num_warps=warps)


def main():
    from tilefuse.ops.so2_mixing_stack import launch
    from tilefuse.ops.so2_mixing_stack.configs import FP16X3, So2Config
    from tilefuse.ops.so2_mixing_stack.reference import So2Dims
    from tilefuse.tuning import timing
    F, check_edges = 2, 2 ** 16
    print(f"# {torch.cuda.get_device_name()}; torch {torch.__version__}")
    for E, lmax, cf in ((647000, 3, 32), (300000, 6, 32), (400000, 2, 64)):
        d = So2Dims(lmax, cf)
        g = torch.Generator(device="cuda").manual_seed(E)
        a = torch.randn(F, E, d.row, generator=g, device="cuda") * 0.5
        res = torch.randn(F, E, d.row, generator=g, device="cuda")
        out = torch.empty_like(a)
        w0 = torch.randn(1, F, d.m0, d.m0, generator=g, device="cuda") * d.m0 ** -0.5
        w1 = torch.randn(1, F, d.m1, d.m1, generator=g, device="cuda") * d.m1 ** -0.5
        n = min(E, check_edges)
        a64, r64 = a[:, :n].double(), res[:, :n].double()
        ref = r64 + torch.cat([a64[..., :d.m0] @ w0[0].double().transpose(-1, -2),
                               a64[..., d.m0:] @ w1[0].double().transpose(-1, -2)], -1)
        print(f"\n## E={E} lmax={lmax} Cf={cf}")
        providers = {}
        tiles = ((64, 64, 4), (64, 128, 4), (128, 64, 8)) if cf == 32 else ((64, 64, 4), (128, 128, 8))
        for bm, bn, warps in tiles:
            cfg = So2Config(bm, bn, cf, warps, 3, precision=FP16X3)
            w0t, w1t = (launch._layer(launch._weights(x, cfg, transpose=True), 0) for x in (w0, w1))
            calls = {"triton": lambda w0t=w0t, w1t=w1t, cfg=cfg: launch._gemm_t(a, w0t, w1t, res, out, d, cfg),
                     "gluon": lambda w0t=w0t, w1t=w1t, bm=bm, bn=bn, warps=warps:
                         gluon_pair(a, w0t, w1t, res, out, d, bm, bn, warps),
                     "gluon-tma": gluon_tma_pair(a, w0t, w1t, res, out, d, bm, bn, warps)}
            got = {}
            for name, fn in calls.items():
                out.fill_(float("nan"))
                fn()
                got[name] = out.clone()
                err = float((out[:, :n].double() - ref).norm() / ref.norm())
                print(f"  M{bm} N{bn} w{warps} {name:9s}: error vs float64 {err:.3e}, finite {bool(out.isfinite().all())}")
                providers[f"M{bm} N{bn} w{warps} {name}"] = fn
            for name in ("gluon", "gluon-tma"):
                print(f"  M{bm} N{bn} w{warps}: {name} bitwise equal to triton: {torch.equal(got[name], got['triton'])}")
            del got
        t = timing.interleaved(providers, graphs=True, rounds=5)
        for name, r in t.items():
            base = t[name.rsplit(" ", 1)[0] + " triton"]
            print(f"  {name:24s} {r.median_ms:8.3f} ms (spread {r.spread:.1%})  x{timing.ratio(base, r):.3f} vs triton")
        del a, res, out, providers
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
