"""Run 2 prototype: a weight-stationary persistent so2 layer GEMM (BWD epilogue), against
so2_gemm_kernel at the same tiles.

Each program owns one (focus, column tile) and holds that tile's weights for the whole K walk
(a tuple of K_TILES (BLOCK_K, BLOCK_N) tiles, loaded once: Triton keeps them in shared memory),
then walks row blocks p, p + P, ... of its focus; the P programs of each (focus, column tile) are
resident together, so the column tiles of one row block read its A rows at about the same time
(L2). Per row block the K walk, the dots and the epilogue are so2_gemm_kernel's, so the outputs
must be bitwise equal at equal tiles.

    PYTHONPATH=src python3 benchmarks/results/2026-12-02-h200-p/run2_proto.py [--tiny]
"""

from __future__ import annotations

import sys

import torch
import triton
import triton.language as tl

from tilefuse.device import num_sms
from tilefuse.ops.so2_mixing_stack import kernels, launch
from tilefuse.ops.so2_mixing_stack.configs import So2Config
from tilefuse.ops.so2_mixing_stack.kernels import pow2_row_scale
from tilefuse.ops.so2_mixing_stack.reference import So2Dims
from tilefuse.ops.triton_common import to_output
from tilefuse.tuning import timing
from tilefuse.utils import cdiv


@triton.jit
def proto_kernel(a_ptr, w_ptr, wlo_ptr, wscale_ptr, res_ptr, out_ptr,
                 E, ROW, K_START, N_START, N_LEN, P, w_focus_stride, w_stride_k,
                 K_LEN: tl.constexpr, DOT_PRECISION: tl.constexpr,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid = tl.program_id(0)
    n_tiles = tl.cdiv(N_LEN, BLOCK_N)
    slot = pid % P
    tile = pid // P
    focus = tile // n_tiles
    n = N_START + (tile % n_tiles) * BLOCK_N + tl.arange(0, BLOCK_N)
    nmask = n < N_START + N_LEN
    K_TILES: tl.constexpr = (K_LEN + BLOCK_K - 1) // BLOCK_K
    w_offset = focus.to(tl.int64) * w_focus_stride
    ws = ()
    wlos = ()
    for i in tl.static_range(K_TILES):
        k = i * BLOCK_K + tl.arange(0, BLOCK_K)
        w_offs = w_offset + k[:, None] * w_stride_k + (n - K_START)[None, :]
        wmask = (k < K_LEN)[:, None] & nmask[None, :]
        ws = ws + (tl.load(w_ptr + w_offs, mask=wmask, other=0.0),)
        if DOT_PRECISION == "3xfp16":
            wlos = wlos + (tl.load(wlo_ptr + w_offs, mask=wmask, other=0.0),)
    if DOT_PRECISION == "3xfp16":
        inv_col = tl.load(wscale_ptr + focus.to(tl.int64) * w_stride_k + (n - K_START), mask=nmask, other=0.0)
    rows = tl.arange(0, BLOCK_M)
    tile_offs = rows[:, None] * ROW
    for rb in range(slot, tl.cdiv(E, BLOCK_M), P):
        edge0 = (tl.full((), 0, tl.int64) + rb) * BLOCK_M
        emask = edge0 + rows < E
        first = focus.to(tl.int64) * E + edge0
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for i in tl.static_range(K_TILES):
            k = i * BLOCK_K + tl.arange(0, BLOCK_K)
            kmask = k < K_LEN
            a = tl.load((a_ptr + first * ROW) + (tile_offs + (K_START + k)[None, :]),
                        mask=emask[:, None] & kmask[None, :], other=0.0).to(tl.float32)
            if DOT_PRECISION == "3xfp16":
                scale, inv = pow2_row_scale(a)
                a_s = a * scale[:, None]
                a_hi = a_s.to(tl.float16)
                a_lo = (a_s - a_hi.to(tl.float32)).to(tl.float16)
                part = tl.dot(a_lo, ws[i], tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32))
                part = tl.dot(a_hi, wlos[i], part)
                part = tl.dot(a_hi, ws[i], part)
                acc += (part * inv_col[None, :]) * inv[:, None]
            else:
                acc = tl.dot(a, ws[i].to(tl.float32), acc, input_precision=DOT_PRECISION)
        mask = emask[:, None] & nmask[None, :]
        offs = tile_offs + n[None, :]
        res = tl.load((res_ptr + first * ROW) + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store((out_ptr + first * ROW) + offs, to_output(res + acc, out_ptr), mask=mask)


@triton.jit
def proto_tma_kernel(a_desc, w_ptr, wlo_ptr, wscale_ptr, res_desc, out_desc,
                     E, K_START, N_START, N_LEN, P, w_focus_stride, w_stride_k,
                     K_LEN: tl.constexpr, DOT_PRECISION: tl.constexpr,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """proto_kernel with the activation, residual and output tiles through TMA descriptors of the
    (F, E, ROW) surfaces (box (1, BLOCK_M, BLOCK_K / BLOCK_N): rows past E are zero-filled on
    loads and clipped on stores, per focus)."""
    pid = tl.program_id(0)
    n_tiles = tl.cdiv(N_LEN, BLOCK_N)
    slot = pid % P
    tile = pid // P
    focus = tile // n_tiles
    n0 = N_START + (tile % n_tiles) * BLOCK_N
    n = n0 + tl.arange(0, BLOCK_N)
    nmask = n < N_START + N_LEN
    K_TILES: tl.constexpr = (K_LEN + BLOCK_K - 1) // BLOCK_K
    w_offset = focus.to(tl.int64) * w_focus_stride
    ws = ()
    wlos = ()
    for i in tl.static_range(K_TILES):
        k = i * BLOCK_K + tl.arange(0, BLOCK_K)
        w_offs = w_offset + k[:, None] * w_stride_k + (n - K_START)[None, :]
        wmask = (k < K_LEN)[:, None] & nmask[None, :]
        ws = ws + (tl.load(w_ptr + w_offs, mask=wmask, other=0.0),)
        if DOT_PRECISION == "3xfp16":
            wlos = wlos + (tl.load(wlo_ptr + w_offs, mask=wmask, other=0.0),)
    if DOT_PRECISION == "3xfp16":
        inv_col = tl.load(wscale_ptr + focus.to(tl.int64) * w_stride_k + (n - K_START), mask=nmask, other=0.0)
    for rb in range(slot, tl.cdiv(E, BLOCK_M), P):
        edge0 = rb * BLOCK_M
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for i in tl.static_range(K_TILES):
            a = a_desc.load([focus, edge0, K_START + i * BLOCK_K]).reshape(BLOCK_M, BLOCK_K)
            if DOT_PRECISION == "3xfp16":
                scale, inv = pow2_row_scale(a)
                a_s = a * scale[:, None]
                a_hi = a_s.to(tl.float16)
                a_lo = (a_s - a_hi.to(tl.float32)).to(tl.float16)
                part = tl.dot(a_lo, ws[i], tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32))
                part = tl.dot(a_hi, wlos[i], part)
                part = tl.dot(a_hi, ws[i], part)
                acc += (part * inv_col[None, :]) * inv[:, None]
            else:
                acc = tl.dot(a, ws[i].to(tl.float32), acc, input_precision=DOT_PRECISION)
        res = res_desc.load([focus, edge0, n0]).reshape(BLOCK_M, BLOCK_N)
        out_desc.store([focus, edge0, n0], (res + acc).reshape(1, BLOCK_M, BLOCK_N))


def proto_gemm(a, w, res, out, d, cfg, k_start, k_len, programs_per_sm):
    w, w_lo, w_scale = w if isinstance(w, tuple) else (w, None, None)
    F = w.shape[0]
    E = a.shape[1]
    n_tiles = cdiv(k_len, cfg.block_n)
    P = max(1, programs_per_sm * num_sms(a.device) // (F * n_tiles))
    P = min(P, cdiv(E, cfg.block_m))
    proto_kernel[(F * n_tiles * P,)](
        a, w, w if w_lo is None else w_lo, out if w_scale is None else w_scale, res, out,
        E, d.row, k_start, k_start, k_len, P, w.stride(0), w.stride(1),
        K_LEN=k_len, DOT_PRECISION=cfg.dot_precision(True), BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n,
        BLOCK_K=cfg.block_k, num_warps=cfg.num_warps, num_stages=cfg.num_stages)


def proto_tma_gemm(a, w, res, out, d, cfg, k_start, k_len, programs_per_sm):
    from triton.tools.tensor_descriptor import TensorDescriptor
    w, w_lo, w_scale = w if isinstance(w, tuple) else (w, None, None)
    F, E, ROW = a.shape
    n_tiles = cdiv(k_len, cfg.block_n)
    P = max(1, min(programs_per_sm * num_sms(a.device) // (F * n_tiles), cdiv(E, cfg.block_m)))
    shape, strides = [F, E, ROW], [E * ROW, ROW, 1]
    a_desc = TensorDescriptor(a, shape, strides, [1, cfg.block_m, cfg.block_k])
    res_desc = TensorDescriptor(res, shape, strides, [1, cfg.block_m, cfg.block_n])
    out_desc = TensorDescriptor(out, shape, strides, [1, cfg.block_m, cfg.block_n])
    proto_tma_kernel[(F * n_tiles * P,)](
        a_desc, w, w if w_lo is None else w_lo, out if w_scale is None else w_scale, res_desc, out_desc,
        E, k_start, k_start, k_len, P, w.stride(0), w.stride(1),
        K_LEN=k_len, DOT_PRECISION=cfg.dot_precision(True), BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n,
        BLOCK_K=cfg.block_k, num_warps=cfg.num_warps, num_stages=cfg.num_stages)


def main():
    tiny = "--tiny" in sys.argv
    dev = "cpu" if tiny else "cuda"
    F = 2
    shapes = ((37, 1, 16), (70, 2, 32)) if tiny else ((647000, 3, 32), (300000, 6, 32), (400000, 2, 64))
    kw = dict(timer=timing.WallTimer()) if tiny else {}
    ex, fp = "ieee", "3xfp16"
    # (precision, BLOCK_M, BLOCK_N, warps, stages, implementations)
    plan = [(ex, 64, 64, 4, 2, ("base", "ptr1", "ptr2", "tma1")), (ex, 128, 64, 8, 2, ("base", "ptr1", "tma1")),
            (ex, 64, 128, 4, 2, ("base", "tma1")),
            (fp, 64, 64, 4, 3, ("base", "ptr1", "tma1")), (fp, 64, 64, 8, 2, ("base", "tma1")),
            (fp, 64, 32, 4, 2, ("tma1", "tma2")), (fp, 128, 64, 8, 3, ("base",)), (fp, 256, 64, 8, 3, ("base",)),
            (fp, 128, 128, 8, 3, ("base",)), (fp, 64, 128, 4, 3, ("base",)), (fp, 256, 64, 8, 2, ("base",))]
    for E, lmax, cf in shapes:
        d = So2Dims(lmax, cf)
        g = torch.Generator(device=dev).manual_seed(E)
        a = torch.randn(F, E, d.row, generator=g, device=dev)
        res = torch.randn(F, E, d.row, generator=g, device=dev)
        out = torch.empty_like(a)
        w0 = torch.randn(1, F, d.m0, d.m0, generator=g, device=dev) * d.m0 ** -0.5
        w1 = torch.randn(1, F, d.m1, d.m1, generator=g, device=dev) * d.m1 ** -0.5
        print(f"\n## E={E} lmax={lmax} Cf={cf}: backward GEMM pair (BWD), ms; bitwise = the prototype == "
              f"so2_gemm_kernel at the same tiles; floor = (A + res + out bytes) / 4.3 TB/s "
              f"{3 * a.numel() * 4 / 4.3e9:.3f} ms", flush=True)
        providers, checks = {}, {}
        for prec, bm, bn, warps, stages, impls in plan:
            cfg = So2Config(bm, bn, cf if cf <= 64 else 32, warps, stages, precision=prec)
            w0t, w1t = (launch._layer(launch._weights(w, cfg, transpose=True), 0) for w in (w0, w1))

            def run(impl, cfg=cfg, w0t=w0t, w1t=w1t):
                if impl == "base":
                    return launch._gemm_t(a, w0t, w1t, res, out, d, cfg)
                fn = proto_gemm if impl.startswith("ptr") else proto_tma_gemm
                for wt, k0, kl in ((w0t, 0, d.m0), (w1t, d.m0, d.m1)):
                    fn(a, wt, res, out, d, cfg, k0, kl, int(impl[-1]))

            out.fill_(float("nan"))
            run("base")
            ref = out.clone()
            for impl in impls:
                name = f"{cfg.name} {impl}"
                out.fill_(float("nan"))
                try:
                    run(impl)
                except Exception as exc:  # noqa: BLE001  out of resources: reported
                    print(f"  {name}: {type(exc).__name__}: {str(exc)[:120]}")
                    continue
                checks[name] = bool(torch.equal(out, ref))
                providers[name] = lambda impl=impl, run=run: run(impl)
            del ref
        res_t = timing.interleaved(providers, rounds=3 if tiny else 5, graphs=True, **kw)
        for name, t in res_t.items():
            if isinstance(t, Exception):
                print(f"  {name:44s} failed: {t!r}"[:160])
                continue
            print(f"  {name:44s} {t.median_ms:8.3f} ms (spread {t.spread:.1%})  bitwise {checks[name]}", flush=True)
        del a, res, out
        if not tiny:
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
