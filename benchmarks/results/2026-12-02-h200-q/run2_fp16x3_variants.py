"""Run 2 (probe): two restructurings of the 3xfp16 layer GEMM (so2_gemm_kernel, BWD mode)
against the kernel as it is, for the level-3 GEMMs' latency (2026-12-02-h200-p run 1: 48% of
cycles with no eligible warp; per K tile the kernel reduces each activation row's maximum,
splits the tile, stores the halves to shared memory, runs three wgmma each followed by a wait,
and moves the row scales into the accumulator's layout).

- "segscale": each row's power-of-two scale from its maximum over the whole K segment (a
  first pass over the row block's A rows, mostly L2 hits), so the K loop splits with a fixed
  scale; each K tile's three products from a zero accumulator are added to the float32
  accumulator (as today); the column and row scales are applied once, in the epilogue (powers
  of two: the same value as scaling every tile unless a partial sum leaves float32's range).
- "tcacc": as segscale, but the three products of every K tile accumulate on the tensor cores
  across the whole K walk (no float32 add per tile, no wait per tile). Tensor cores truncate
  while they accumulate: 2026-12-01-h200-h measured about twice the error of the per-tile add,
  so this one is a candidate only if its error stays well inside the level-3 bound (1.5x the
  exact path's).

Per shape: the backward pair (m = 0 and |m| = 1 segments of one layer) of each variant at the
3xfp16 tiles, its normwise error against float64 on the first 2**16 edges (the exact kernel's
beside it), and the time (timing.interleaved, CUDA-graph replay, 5 rounds).

    PYTHONPATH=src python3 benchmarks/results/2026-12-02-h200-q/run2_fp16x3_variants.py
    TRITON_INTERPRET=1 PYTHONPATH=src python3 benchmarks/results/2026-12-02-h200-q/run2_fp16x3_variants.py --tiny
"""

from __future__ import annotations

import sys

import torch
import triton
import triton.language as tl

from tilefuse.ops.so2_mixing_stack import launch
from tilefuse.ops.so2_mixing_stack.configs import FP16X3, So2Config
from tilefuse.ops.so2_mixing_stack.kernels import _tile, pow2_scale
from tilefuse.ops.so2_mixing_stack.reference import So2Dims
from tilefuse.tuning import timing
from tilefuse.utils import cdiv

F = 2
SHAPES = ((647000, 3, 32), (300000, 6, 32), (400000, 2, 64))
TILES = ((64, 64, 4, 3), (128, 64, 8, 3), (64, 128, 4, 3), (128, 128, 8, 3))
CHECK_EDGES = 2 ** 16


@triton.jit
def gemm_bwd_variant(a_ptr, w_ptr, wlo_ptr, wscale_ptr, res_ptr, out_ptr, E, ROW, K_START, K_LEN, N_START, N_LEN,
                     w_focus_stride, w_stride_k, TC_ACC: tl.constexpr, BLOCK_M: tl.constexpr,
                     BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """out[:, n] = res[:, n] + a[:, K segment] @ W (3xfp16, W split per column as
    launch.split_fp16 splits it; the row scales over the whole K segment)."""
    focus, edge0, n0 = _tile(tl.program_id(0), E, N_LEN, BLOCK_M, BLOCK_N)
    rows = tl.arange(0, BLOCK_M)
    emask = edge0 + rows < E
    n = N_START + n0 + tl.arange(0, BLOCK_N)
    nmask = n < N_START + N_LEN
    first = focus.to(tl.int64) * E + edge0
    a_base = a_ptr + first * ROW
    tile = rows[:, None] * ROW
    amax = tl.zeros((BLOCK_M,), dtype=tl.float32)
    for k0 in range(0, K_LEN, BLOCK_K):
        k = k0 + tl.arange(0, BLOCK_K)
        a = tl.load(a_base + (tile + (K_START + k)[None, :]), mask=emask[:, None] & (k < K_LEN)[None, :], other=0.0)
        amax = tl.maximum(amax, tl.max(tl.abs(a), axis=1))
    scale, inv = pow2_scale(amax)
    w_base = focus.to(tl.int64) * w_focus_stride
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K_LEN, BLOCK_K):
        k = k0 + tl.arange(0, BLOCK_K)
        kmask = k < K_LEN
        a = tl.load(a_base + (tile + (K_START + k)[None, :]), mask=emask[:, None] & kmask[None, :], other=0.0)
        a_s = a * scale[:, None]
        a_hi = a_s.to(tl.float16)
        a_lo = (a_s - a_hi.to(tl.float32)).to(tl.float16)
        w_offs = w_base + k[:, None] * w_stride_k + (n - K_START)[None, :]
        wmask = kmask[:, None] & nmask[None, :]
        w = tl.load(w_ptr + w_offs, mask=wmask, other=0.0)
        w_lo = tl.load(wlo_ptr + w_offs, mask=wmask, other=0.0)
        if TC_ACC:
            acc = tl.dot(a_lo, w, acc)
            acc = tl.dot(a_hi, w_lo, acc)
            acc = tl.dot(a_hi, w, acc)
        else:
            part = tl.dot(a_lo, w, tl.zeros(acc.shape, dtype=tl.float32))
            part = tl.dot(a_hi, w_lo, part)
            part = tl.dot(a_hi, w, part)
            acc += part
    inv_col = tl.load(wscale_ptr + focus.to(tl.int64) * w_stride_k + (n - K_START), mask=nmask, other=0.0)
    acc = (acc * inv_col[None, :]) * inv[:, None]
    mask = emask[:, None] & nmask[None, :]
    offs = tile + n[None, :]
    res = tl.load((res_ptr + first * ROW) + offs, mask=mask, other=0.0)
    tl.store((out_ptr + first * ROW) + offs, res + acc, mask=mask)


def variant_pair(tc_acc, a, w0t, w1t, res, out, d, cfg):
    for (w, w_lo, w_scale), k_start, k_len in ((w0t, 0, d.m0), (w1t, d.m0, d.m1)):
        Fw, E = w.shape[0], a.shape[1]
        gemm_bwd_variant[(Fw * cdiv(E, cfg.block_m) * cdiv(k_len, cfg.block_n),)](
            a, w, w_lo, w_scale, res, out, E, d.row, k_start, k_len, k_start, k_len, w.stride(0), w.stride(1),
            TC_ACC=tc_acc, BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k,
            num_warps=cfg.num_warps, num_stages=cfg.num_stages)


def main():
    tiny = "--tiny" in sys.argv
    dev = "cpu" if tiny else "cuda"
    shapes = ((300, 1, 16), (200, 2, 32)) if tiny else SHAPES
    kw = dict(timer=timing.WallTimer(), rounds=1) if tiny else dict(rounds=5)
    print(f"# {'CPU' if tiny else torch.cuda.get_device_name()}; torch {torch.__version__}; triton {triton.__version__}")
    for E, lmax, cf in shapes:
        d = So2Dims(lmax, cf)
        g = torch.Generator(device=dev).manual_seed(E)

        def randn(*shape, scale=1.0):
            return torch.randn(shape, generator=g, device=dev) * scale

        a, res = randn(F, E, d.row, scale=0.5), randn(F, E, d.row)
        out = torch.empty_like(a)
        w0, w1 = randn(1, F, d.m0, d.m0, scale=d.m0 ** -0.5), randn(1, F, d.m1, d.m1, scale=d.m1 ** -0.5)
        n = min(E, CHECK_EDGES)
        a64, r64 = a[:, :n].double(), res[:, :n].double()
        ref = r64 + torch.cat([a64[..., :d.m0] @ w0[0].double().transpose(-1, -2),
                               a64[..., d.m0:] @ w1[0].double().transpose(-1, -2)], -1)

        def err():
            return float((out[:, :n].double() - ref).norm() / ref.norm())

        exact = So2Config(64, 64, cf, 4, 2)
        launch._gemm_t(a, *(launch._layer(launch._weights(x, exact, transpose=True), 0) for x in (w0, w1)),
                       res, out, d, exact)
        print(f"\n## E={E} lmax={lmax} Cf={cf}: exact error {err():.3e}")
        providers = {}
        for bm, bn, warps, stages in TILES:
            cfg = So2Config(bm, bn, cf, warps, stages, precision=FP16X3)
            w0t, w1t = (launch._layer(launch._weights(x, cfg, transpose=True), 0) for x in (w0, w1))
            calls = {"kernel": lambda w0t=w0t, w1t=w1t, cfg=cfg: launch._gemm_t(a, w0t, w1t, res, out, d, cfg)}
            for name, tc in (("segscale", False), ("tcacc", True)):
                calls[name] = lambda w0t=w0t, w1t=w1t, cfg=cfg, tc=tc: variant_pair(tc, a, w0t, w1t, res, out, d, cfg)
            for name, fn in calls.items():
                tag = f"M{bm:<3d} N{bn:<3d} w{warps} s{stages} {name}"
                out.fill_(float("nan"))
                fn()
                print(f"  {tag:32s} error {err():.3e}  finite {bool(out.isfinite().all())}")
                providers[tag] = fn
        t = timing.interleaved(providers, graphs=not tiny, **kw)
        for name, r in t.items():
            base = t[name.rsplit(" ", 1)[0] + " kernel"]
            print(f"  {name:32s} {r.median_ms:8.3f} ms (spread {r.spread:.1%})  x{timing.ratio(base, r):.3f} vs kernel")
        del a, res, out, providers
        if not tiny:
            torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
