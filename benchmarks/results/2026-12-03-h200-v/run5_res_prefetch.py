"""Run 5: issue 15's level-3 GEMM (the shipped kernel after run 3: activation tiles by TMA) with its
epilogue's residual tile prefetched by TMA at the program's start.

The epilogue of wgmma_kernels.so2_gemm3x_wgmma_kernel loads the residual tile through pointers
after the K loop, so each program's last act waits a full memory latency with nothing else in
flight. Here (BWD mode, the backward's layer GEMM) the residual tile [BLOCK_M, BLOCK_N] is
requested by TMA before the K loop (a 2-D descriptor over (F * E, ROW) like the activations':
rows past E are the next focus's, read and never stored) and read from shared memory by the epilogue. The additions are the same, so the outputs
must be bitwise equal (checked).

    PYTHONPATH=src python3 benchmarks/results/2026-12-03-h200-v/run5_res_prefetch.py
"""

from __future__ import annotations

import sys

import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import mbarrier
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

from tilefuse.ops.so2_mixing_stack.wgmma_kernels import (A_STAGES, _a_layout, _a_tile, _column_scales, _cta_barrier,
                                                         _k_step, _mma_layout, _ring, _tile_of, _tma_load,
                                                         _weight_tiles)


@gluon.jit
def res_prefetch_kernel(ad, rd, wd, wlod, wscale_ptr, out_ptr, F, E, ROW, K_START, K_LEN, N_START, N_LEN,
                        w_rows, w_stride_k, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr,
                        num_warps: gl.constexpr):
    a_layout: gl.constexpr = _a_layout(BLOCK_N, num_warps)
    mma: gl.constexpr = _mma_layout(BLOCK_N, num_warps)
    w_s, wlo_s, bars = _ring(wd, BLOCK_N, BLOCK_K)
    a_s = gl.allocate_shared_memory(gl.float32, [A_STAGES, BLOCK_M, BLOCK_K], ad.layout)
    a_bars = gl.allocate_shared_memory(gl.int64, [A_STAGES, 1], mbarrier.MBarrierLayout())
    for s in gl.static_range(A_STAGES):
        mbarrier.init(a_bars.index(s), count=1)
    r_s = gl.allocate_shared_memory(gl.float32, [BLOCK_M, BLOCK_N], rd.layout)
    r_bar = gl.allocate_shared_memory(gl.int64, [1, 1], mbarrier.MBarrierLayout())
    mbarrier.init(r_bar.index(0), count=1)
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
    _weight_tiles(wd, wlod, w_s, wlo_s, bars, w_row0, 0, n_k, w_col0, BLOCK_K, BLOCK_N)
    # the residual tile, requested after the first K tiles
    mbarrier.expect(r_bar.index(0), BLOCK_M * BLOCK_N * 4)
    _tma_load(rd, [a_row0, N_START + n0], r_bar.index(0), r_s)
    for i in range(n_k):
        slot = i % A_STAGES
        mbarrier.wait(a_bars.index(slot), (i // A_STAGES) & 1)
        a = a_s.index(slot).load(a_layout)
        acc, p = _k_step(acc, p, a, i, n_k, inv_col, w_s, wlo_s, bars, wd, wlod, w_row0, w_col0, BLOCK_K, BLOCK_N,
                         num_warps)
        _a_tile(ad, a_s, a_bars, a_row0, a_col0, i + A_STAGES, n_k, A_STAGES, BLOCK_M, BLOCK_K)
    # the BWD epilogue (wgmma_kernels._epilogue's) with the residual from shared memory
    oblk: gl.constexpr = gl.BlockedLayout([1, 4], [2, 16], [num_warps, 1], [1, 0])
    EPI_N: gl.constexpr = 64 if BLOCK_N > 64 else BLOCK_N
    epi_s = gl.allocate_shared_memory(gl.float32, [BLOCK_M, BLOCK_N], gl.SwizzledSharedLayout(1, 1, 1, [1, 0]))
    epi_s.store(acc)
    _cta_barrier()
    mbarrier.wait(r_bar.index(0), 0)
    first = focus.to(gl.int64) * E + edge0
    orow = gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, oblk))
    emask = (edge0 + orow) < E
    base = first * ROW
    for c in gl.static_range(BLOCK_N // EPI_N):
        y = epi_s.slice(c * EPI_N, EPI_N, dim=1).load(oblk)
        res = r_s.slice(c * EPI_N, EPI_N, dim=1).load(oblk)
        n = N_START + n0 + c * EPI_N + gl.arange(0, EPI_N, layout=gl.SliceLayout(0, oblk))
        mask = emask[:, None] & (n < N_START + N_LEN)[None, :]
        gl.store((out_ptr + base) + (orow[:, None] * ROW + n[None, :]), res + y, mask=mask)


def res_prefetch_pair(gz, w0t, w1t, res, out, d, block_m, block_n, warps):
    from tilefuse.ops.so2_mixing_stack import wgmma_kernels
    F, E = gz.shape[0], gz.shape[1]
    ad = wgmma_kernels.activation_descriptor(gz, False, block_m, d.focus_dim)
    rlay = gl.NVMMASharedLayout.get_default_for([block_m, block_n], gl.float32)
    rd = TensorDescriptor.from_tensor(res.view(F * E, d.row), [block_m, block_n], rlay)
    for (w, w_lo, w_scale), start, length in ((w0t, 0, d.m0), (w1t, d.m0, d.m1)):
        descs = wgmma_kernels.descriptors(w, w_lo, d.focus_dim, block_n)
        grid = (F * -(-E // block_m) * -(-length // block_n),)
        res_prefetch_kernel[grid](ad, rd, *descs, w_scale, out, F, E, d.row, start, length, start, length,
                                  w.shape[1], w_scale.stride(0), BLOCK_M=block_m, BLOCK_N=block_n,
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
        for bm, bn, warps in ((64, 64, 4), (64, 128, 4), (128, 64, 8)):
            cfg = So2Config(bm, bn, cf, warps, 2, precision=FP16X3, wgmma=True)
            providers[f"shipped M{bm} N{bn} w{warps}"] = lambda cfg=cfg: launch._gemm_t(gz, w0t, w1t, res, out, d, cfg)
            providers[f"res-prefetch M{bm} N{bn} w{warps}"] = \
                lambda bm=bm, bn=bn, warps=warps: res_prefetch_pair(gz, w0t, w1t, res, out, d, bm, bn, warps)
        for name, fn in providers.items():
            out.fill_(float("nan"))
            try:
                fn()
                torch.cuda.synchronize()
                outs[name] = out.clone()
            except Exception as exc:  # noqa: BLE001 - e.g. shared memory: reported
                print(f"  {name}: {type(exc).__name__}: {str(exc)[:200]}", flush=True)
        providers = {k: v for k, v in providers.items() if k in outs}
        for name, o in outs.items():
            base = outs["shipped " + name.split(" ", 1)[1]]
            print(f"  {name:28s} bitwise the shipped kernel's at its tile: {torch.equal(o, base)}", flush=True)
        del outs
        t = timing.interleaved(providers, graphs=True, rounds=7)
        for name, r in t.items():
            print(f"  {name:28s} {r.median_ms:8.3f} ms (spread {r.spread:.1%})", flush=True)
        del gz, res, out, providers
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
