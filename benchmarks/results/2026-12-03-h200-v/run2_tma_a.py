"""Run 2: issue 15's level-3 GEMM with its activation tiles brought by TMA into a shared-memory
ring several K tiles deep.

Run 1 (run1_deferred.py) took out the per-K-tile rescale and found the kernel *slower* even
with no pre-pass at all (a fixed scale: 2.124 against 1.900 ms at Neo): those variants held
151-157 registers (three 4-warp programs an SM) against the shipped kernel's 125 (four). So the
shipped kernel's limit is the bytes in flight, not its instruction count: each program has
one activation tile (8 KB at 64x32) loading through registers while it multiplies the last.

Here the activation tiles come by TMA into a ring of STAGES slots (zero-filled past the last
row of the tensor; rows past E of one focus are the next focus's rows, computed and never
stored), each program keeping STAGES - 1 tiles in flight without registers holding them, and
each tile is read from shared memory into wgmma's register A operand layout where it is used.
The arithmetic is the shipped kernel's (wgmma_kernels._k_step), so the outputs must be bitwise
equal (checked). BWD mode only.

    PYTHONPATH=src python3 benchmarks/results/2026-12-03-h200-v/run2_tma_a.py
"""

from __future__ import annotations

import sys

import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import mbarrier
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

from tilefuse.ops.so2_mixing_stack.kernels import BWD
from tilefuse.ops.so2_mixing_stack.wgmma_kernels import (_a_layout, _column_scales, _epilogue, _k_step, _mma_layout,
                                                         _ring, _tile_of, _tma_load, _weight_tiles)


@gluon.jit
def _a_tile(ad, a_s, a_bars, row0, col0, k_tile, n_k, STAGES: gl.constexpr, BLOCK_M: gl.constexpr,
            BLOCK_K: gl.constexpr):
    slot = k_tile % STAGES
    ok = k_tile < n_k
    mbarrier.expect(a_bars.index(slot), BLOCK_M * BLOCK_K * 4, pred=ok)
    _tma_load(ad, [row0, col0 + k_tile * BLOCK_K], a_bars.index(slot), a_s.index(slot), pred=ok)


@gluon.jit
def tma_a_kernel(ad, wd, wlod, wscale_ptr, res_ptr, out_ptr, F, E, ROW, K_START, K_LEN, N_START, N_LEN,
                 w_rows, w_stride_k, STAGES: gl.constexpr,
                 BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr, num_warps: gl.constexpr):
    a_layout: gl.constexpr = _a_layout(BLOCK_N, num_warps)
    mma: gl.constexpr = _mma_layout(BLOCK_N, num_warps)
    w_s, wlo_s, bars = _ring(wd, BLOCK_N, BLOCK_K)
    a_s = gl.allocate_shared_memory(gl.float32, [STAGES, BLOCK_M, BLOCK_K], ad.layout)
    a_bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for s in gl.static_range(STAGES):
        mbarrier.init(a_bars.index(s), count=1)
    focus, edge0, n0 = _tile_of(E, N_LEN, BLOCK_M, BLOCK_N)
    n_k = K_LEN // BLOCK_K
    row0 = (focus.to(gl.int64) * E + edge0).to(gl.int32)
    inv_col = _column_scales(wscale_ptr, focus, w_stride_k, N_START, N_LEN, K_START, n0, BLOCK_N, num_warps)
    w_row0 = focus * w_rows
    w_col0 = N_START - K_START + n0
    for s in gl.static_range(STAGES):
        _a_tile(ad, a_s, a_bars, row0, K_START, s, n_k, STAGES, BLOCK_M, BLOCK_K)
    acc = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, layout=mma)
    p = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, layout=mma)
    _weight_tiles(wd, wlod, w_s, wlo_s, bars, w_row0, 0, n_k, w_col0, BLOCK_K, BLOCK_N)
    for i in range(n_k):
        slot = i % STAGES
        mbarrier.wait(a_bars.index(slot), (i // STAGES) & 1)
        a = a_s.index(slot).load(a_layout)
        # _k_step's CTA barrier comes after every warp's read of slot i % STAGES
        acc, p = _k_step(acc, p, a, i, n_k, inv_col, w_s, wlo_s, bars, wd, wlod, w_row0, w_col0, BLOCK_K, BLOCK_N,
                         num_warps)
        _a_tile(ad, a_s, a_bars, row0, K_START, i + STAGES, n_k, STAGES, BLOCK_M, BLOCK_K)
    mbarrier.invalidate(bars.index(0))
    mbarrier.invalidate(bars.index(1))
    for s in gl.static_range(STAGES):
        mbarrier.invalidate(a_bars.index(s))
    _epilogue(acc, out_ptr, res_ptr, out_ptr, out_ptr, out_ptr, F, E, ROW, 0, 1, N_START, N_LEN, focus, edge0, n0,
              BWD, False, BLOCK_M, BLOCK_N, num_warps)


def tma_a_pair(gz, w0t, w1t, res, out, d, block_m, block_n, warps, stages):
    from tilefuse.ops.so2_mixing_stack import wgmma_kernels
    F, E = gz.shape[0], gz.shape[1]
    layout = gl.NVMMASharedLayout.get_default_for([block_m, d.focus_dim], gl.float32)
    ad = TensorDescriptor.from_tensor(gz.view(F * E, d.row), [block_m, d.focus_dim], layout)
    for (w, w_lo, w_scale), start, length in ((w0t, 0, d.m0), (w1t, d.m0, d.m1)):
        descs = wgmma_kernels.descriptors(w, w_lo, d.focus_dim, block_n)
        grid = (F * -(-E // block_m) * -(-length // block_n),)
        tma_a_kernel[grid](ad, *descs, w_scale, res, out, F, E, d.row, start, length, start, length, w.shape[1],
                           w_scale.stride(0), STAGES=stages, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=d.focus_dim,
                           num_warps=warps)


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
            for stages in (2, 3, 4):
                providers[f"tma-A{stages} M{bm} N{bn} w{warps}"] = \
                    lambda bm=bm, bn=bn, warps=warps, stages=stages: \
                    tma_a_pair(gz, w0t, w1t, res, out, d, bm, bn, warps, stages)
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
        t = timing.interleaved(providers, graphs=True, rounds=5)
        for name, r in t.items():
            print(f"  {name:28s} {r.median_ms:8.3f} ms (spread {r.spread:.1%})", flush=True)
        del gz, res, out, providers
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
