"""The level-3 (3xfp16) layer GEMM on Hopper in Gluon: kernels.so2_gemm_kernel's arithmetic with
one wgmma wait a K tile instead of three. Only ``@gluon.jit`` code and its availability;
launch.py launches (So2Config.wgmma).

Why Gluon: so2_gemm_kernel's 3xfp16 K loop sums three tensor-core products from a zero
accumulator a K tile, and Triton (3.6, 3.8) waits after each of the three wgmma
(kernels.tile_product). Here the three are issued back to back and waited for once, with the
weight head and tail tiles brought by TMA straight into a shared-memory ring (registers holding
them and their addresses spilled the larger tiles) of So2Config.num_stages slots, each K tile's
weights requested num_stages - 1 tiles ahead (2 in every tuning candidate; 3-4 compile to the
same registers, give the same bits and ran 1.06-1.31x slower at 64x64, benchmarks/results/
2026-12-03-h200-w run 6). The float32 activation tiles come by TMA too, into a ring of A_STAGES
slots, and each is read from there in the layout of wgmma's register A operand and scaled and
split in registers: its float16 head and tail never go through shared memory (with them stored
to and read from it, Nsight Compute had L1/TEX the busiest unit at 76%; in registers the
backward GEMM passes ran 1.02-1.09x faster, benchmarks/results/2026-12-02-h200-u runs 3-4). The
TMA ring keeps a tile in flight without registers or per-element addresses: against pointer
loads a K tile ahead the backward GEMM pair ran 1.03-1.39x faster at the benchmark shapes,
bitwise the same (results/2026-12-03-h200-v run 2). No unfinished product crosses the loop's
back edge: where one does, ptxas serialises every wgmma (C7515 / C7514,
benchmarks/results/2026-12-02-h200-t run 5). One program a tile: a persistent grid whose rings
run on across tiles was bitwise and no faster at Cf 32 (0.99-1.00x; 0.83x at Cf 64), at the same
issue rate under Nsight Compute (results/2026-12-03-h200-y runs 1-2).

The arithmetic is so2_gemm_kernel's, operation for operation: the same row scales and float16
splits of the activation tile (pow2 scale of the row's maximum), the same three products in
the same order (a_lo w_hi, a_hi w_lo, a_hi w_hi) from a zero accumulator, joined to the float32
accumulator as (part * inv_col) * inv_row, and the same epilogues (modes FWD_GATED, FINAL, BWD,
BWD_HEAD). The results are bitwise so2_gemm_kernel's (tests/test_so2_wgmma.py, GPU). Gluon
kernels do not run in Triton's interpreter: ``available`` says where they run, and launch.py
takes so2_gemm_kernel elsewhere (the same bits).

Layout contract (launch.py checks it and otherwise falls back): fp32 activations (F, E, ROW)
focus-major, or (E, F, ROW) edge-major for BWD_HEAD, contiguous with a 16-byte aligned base,
read through a 2-D descriptor (``activation_descriptor``) with tiles [BLOCK_M, BLOCK_K]: over
(F * E, ROW) focus-major, where a row block's rows past E are the next focus's first rows (read,
multiplied and never stored: a GEMM's rows do not mix) and rows past F * E read as zeros;
over (E, F * ROW) edge-major; the weight heads and tails float16
contiguous (F, K_W, N_W), read through 2-D descriptors over (F * K_W, N_W) with tiles
[BLOCK_K, BLOCK_N]; K_LEN a multiple of BLOCK_K (a K tile never reaches into the next focus's
rows); the inverse column scales (F, N_W) float32.
"""

from __future__ import annotations

import torch

from ..gluon_hopper import (TensorDescriptor, available, gl, gluon, mbarrier, tma_load,  # noqa: F401 - the API
                            warpgroup_mma, warpgroup_mma_wait)                      # of this module too
from .kernels import BWD, BWD_HEAD, FINAL, FWD_GATED  # noqa: F401 - so2_gemm_kernel's modes (constexprs)


if gluon is not None:
    # The activation ring's depth. Two slots (a K tile loading while the last is multiplied)
    # were the fastest or within the spread of three and four at every tile and shape of
    # results/2026-12-03-h200-v run 2, and take the least shared memory (at Cf 64 three slots
    # left two 64x64 programs an SM, two slots three).
    A_STAGES = gl.constexpr(2)

    # Gluon's names move: triton 3.6 calls the CTA barrier thread_barrier, 3.8 barrier.
    _tma_load = tma_load
    _cta_barrier = gl.thread_barrier if hasattr(gl, "thread_barrier") else gl.barrier

    @gluon.jit
    def _pow2_scale(amax):
        """kernels.pow2_scale: (s, 1/s), powers of two with amax * s in [2**14, 2**15)."""
        exponent = (amax.to(gl.int32, bitcast=True) >> 23) & 0xFF
        biased = gl.minimum(gl.maximum(268 - exponent, 1), 253)
        return (biased << 23).to(gl.float32, bitcast=True), ((254 - biased) << 23).to(gl.float32, bitcast=True)

    @gluon.jit
    def _head_g(x, alpha):
        """kernels.head_g for a float32 output: x * alpha rounded on its own (mul.rn: never
        contracted into a later add)."""
        return gl.inline_asm_elementwise("mul.rn.f32 $0, $1, $2;", "=r,r,r", [x, alpha], dtype=gl.float32,
                                         is_pure=True, pack=1)

    @gluon.jit
    def _weight_tiles(wd, wlod, w_s, wlo_s, bars, w_row0, k_tile, n_k, w_col0, BLOCK_K: gl.constexpr,
                      BLOCK_N: gl.constexpr, W_STAGES: gl.constexpr):
        """TMA: K tile ``k_tile``'s weight head and tail tiles into ring slot k_tile % W_STAGES,
        if k_tile < n_k."""
        slot = k_tile % W_STAGES
        ok = k_tile < n_k
        mbarrier.expect(bars.index(slot), 2 * BLOCK_K * BLOCK_N * 2, pred=ok)
        _tma_load(wd, [w_row0 + k_tile * BLOCK_K, w_col0], bars.index(slot), w_s.index(slot), pred=ok)
        _tma_load(wlod, [w_row0 + k_tile * BLOCK_K, w_col0], bars.index(slot), wlo_s.index(slot), pred=ok)

    @gluon.constexpr_function
    def _a_layout(block_n, num_warps):
        """The activation tile's layout: wgmma's register A operand (float16 pairs along K), so
        the tile is loaded, scaled and split where wgmma reads it, with no trip through shared
        memory (Nsight Compute, results/2026-12-02-h200-u run 3: L1/TEX, shared memory
        included, was the busiest unit at 76% with the split tile stored to and read from it)."""
        return gl.DotOperandLayout(operand_index=0, parent=_mma_layout(block_n, num_warps), k_width=2)

    @gluon.constexpr_function
    def _mma_layout(block_n, num_warps):
        """The wgmma accumulator's layout: a warp group per 64 rows, BLOCK_N wide instructions."""
        block_n, num_warps = getattr(block_n, "value", block_n), getattr(num_warps, "value", num_warps)
        return gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1], instr_shape=[16, block_n, 16])

    @gluon.jit
    def _ring(wd, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr, W_STAGES: gl.constexpr):
        """The K loop's shared memory: W_STAGES slots each of the weight head and tail tiles (in
        the descriptor ``wd``'s layout), and their mbarriers."""
        w_s = gl.allocate_shared_memory(gl.float16, [W_STAGES, BLOCK_K, BLOCK_N], wd.layout)
        wlo_s = gl.allocate_shared_memory(gl.float16, [W_STAGES, BLOCK_K, BLOCK_N], wd.layout)
        bars = gl.allocate_shared_memory(gl.int64, [W_STAGES, 1], mbarrier.MBarrierLayout())
        for s in gl.static_range(W_STAGES):
            mbarrier.init(bars.index(s), count=1)
        return w_s, wlo_s, bars

    @gluon.jit
    def _k_step(acc, p, a, i, n_k, inv_col, w_s, wlo_s, bars, wd, wlod, w_row0, w_col0,
                BLOCK_K: gl.constexpr, BLOCK_N: gl.constexpr, num_warps: gl.constexpr, W_STAGES: gl.constexpr):
        """K tile ``i`` of the 3xfp16 product (kernels.tile_product, operation for operation):
        the float32 activation tile ``a`` (in _a_layout) scaled per row by a power of two and
        split into float16 head and tail in registers, the TMA of tile i + W_STAGES - 1's
        weights issued (into the ring slot tile i - 1 used), then the three wgmma a_lo w_hi,
        a_hi w_lo, a_hi w_hi issued back to back from a zero accumulator and waited for once,
        and joined to ``acc`` as (part * inv_col) * inv_row. ``p`` is the last K tile's product
        (its registers are the first wgmma's ignored accumulator operand). Returns (acc, p)."""
        mma: gl.constexpr = _mma_layout(BLOCK_N, num_warps)
        scale, inv = _pow2_scale(gl.max(gl.abs(a), axis=1))
        a_s = a * scale[:, None]
        a_hi = a_s.to(gl.float16)
        a_lo = (a_s - a_hi.to(gl.float32)).to(gl.float16)
        slot = i % W_STAGES
        # every warp is past the last K tile's wait (its wgmma read slot (i - 1) % W_STAGES):
        # free for the weights W_STAGES - 1 tiles ahead
        _cta_barrier()
        _weight_tiles(wd, wlod, w_s, wlo_s, bars, w_row0, i + W_STAGES - 1, n_k, w_col0, BLOCK_K, BLOCK_N, W_STAGES)
        mbarrier.wait(bars.index(slot), (i // W_STAGES) & 1)
        part = warpgroup_mma(a_lo, w_s.index(slot), p, use_acc=False, is_async=True)
        part = warpgroup_mma(a_hi, wlo_s.index(slot), part, is_async=True)
        part = warpgroup_mma(a_hi, w_s.index(slot), part, is_async=True)
        p = warpgroup_mma_wait(num_outstanding=0, deps=[part])
        acc += (p * inv_col[None, :]) * gl.convert_layout(inv, gl.SliceLayout(1, mma))[:, None]
        return acc, p

    @gluon.jit
    def _tile_of(E, N_LEN, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr):
        """kernels._tile: (focus, int64 first edge, first column offset) of this program; a row
        block's column tiles are consecutive programs."""
        pid = gl.program_id(0)
        n_tiles = gl.cdiv(N_LEN, BLOCK_N)
        n_row_blocks = gl.cdiv(E, BLOCK_M)
        rb = pid // n_tiles
        return rb // n_row_blocks, (rb % n_row_blocks).to(gl.int64) * BLOCK_M, (pid % n_tiles) * BLOCK_N

    @gluon.jit
    def _column_scales(wscale_ptr, focus, w_stride_k, N_START, N_LEN, K_START, n0, BLOCK_N: gl.constexpr,
                       num_warps: gl.constexpr):
        """The tile's inverse weight column scales, in the accumulator's column layout."""
        cvec: gl.constexpr = gl.BlockedLayout([1], [32], [num_warps], [0])
        cn = N_START + n0 + gl.arange(0, BLOCK_N, layout=cvec)
        scales = gl.load(wscale_ptr + focus.to(gl.int64) * w_stride_k + (cn - K_START), mask=cn < N_START + N_LEN,
                         other=0.0)
        return gl.convert_layout(scales, gl.SliceLayout(0, _mma_layout(BLOCK_N, num_warps)))

    @gluon.jit
    def _epilogue(acc, out_ptr, res_ptr, z_ptr, sigma_ptr, alpha_ptr, F, E, ROW, CF, LG, N_START, N_LEN, focus,
                  edge0, n0, MODE: gl.constexpr, APPLY_ALPHA: gl.constexpr, BLOCK_M: gl.constexpr,
                  BLOCK_N: gl.constexpr, num_warps: gl.constexpr):
        """so2_gemm_kernel's epilogue of ``mode`` on the finished tile ``acc``.

        It walks the tile in EPI_N-column chunks read back from shared memory: at BLOCK_N 128
        the whole tile's z, sigma, res and output addresses at once spilled the FWD_GATED
        epilogue (160 bytes, sm_90 compile). Element-wise, so the same values."""
        oblk: gl.constexpr = gl.BlockedLayout([1, 4], [2, 16], [num_warps, 1], [1, 0])
        EPI_N: gl.constexpr = 64 if BLOCK_N > 64 else BLOCK_N
        epi_s = gl.allocate_shared_memory(gl.float32, [BLOCK_M, BLOCK_N], gl.SwizzledSharedLayout(1, 1, 1, [1, 0]))
        epi_s.store(acc)
        _cta_barrier()
        first = focus.to(gl.int64) * E + edge0
        orow = gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, oblk))
        edges = edge0 + orow
        emask = edges < E
        base = first * ROW
        if MODE == FINAL and APPLY_ALPHA:
            alpha = gl.load(alpha_ptr + edges * F + focus, mask=emask, other=0.0).to(gl.float32)
        if MODE == BWD_HEAD and APPLY_ALPHA:
            alpha_o = gl.load(alpha_ptr + edges * F + focus, mask=emask, other=0.0).to(gl.float32)
        for c in gl.static_range(BLOCK_N // EPI_N):
            y = epi_s.slice(c * EPI_N, EPI_N, dim=1).load(oblk)
            n = N_START + n0 + c * EPI_N + gl.arange(0, EPI_N, layout=gl.SliceLayout(0, oblk))
            mask = emask[:, None] & (n < N_START + N_LEN)[None, :]
            offs = orow[:, None] * ROW + n[None, :]
            if MODE == FWD_GATED:
                gl.store((z_ptr + base) + offs, y.to(z_ptr.dtype.element_ty), mask=mask)
                gate = (n - CF) % LG
                y *= gl.load((sigma_ptr + first * LG) + (orow[:, None] * LG + gate[None, :]), mask=mask, other=0.0)
            if MODE == FINAL:
                y = gl.load((res_ptr + base) + offs, mask=mask, other=0.0).to(gl.float32) + y
                if APPLY_ALPHA:
                    y = y * alpha[:, None]
                out_offs = (edges * F + focus) * ROW
                gl.store(out_ptr + out_offs[:, None] + n[None, :], y.to(out_ptr.dtype.element_ty), mask=mask)
            else:   # BWD, BWD_HEAD, and FWD_GATED with y gated above
                if MODE == BWD_HEAD:
                    res = gl.load((res_ptr + (edge0 * F + focus) * ROW) + (orow[:, None] * (F * ROW) + n[None, :]),
                                  mask=mask, other=0.0).to(gl.float32)
                    if APPLY_ALPHA:
                        res = _head_g(res, alpha_o[:, None])
                else:
                    res = gl.load((res_ptr + base) + offs, mask=mask, other=0.0).to(gl.float32)
                gl.store((out_ptr + base) + offs, (res + y).to(out_ptr.dtype.element_ty), mask=mask)

    @gluon.jit
    def _a_tile(ad, a_s, a_bars, a_row0, a_col0, k_tile, n_k, A_STAGES: gl.constexpr, BLOCK_M: gl.constexpr,
                BLOCK_K: gl.constexpr):
        """TMA: K tile ``k_tile``'s activation tile into ring slot k_tile % A_STAGES, if
        k_tile < n_k."""
        slot = k_tile % A_STAGES
        ok = k_tile < n_k
        mbarrier.expect(a_bars.index(slot), BLOCK_M * BLOCK_K * 4, pred=ok)
        _tma_load(ad, [a_row0, a_col0 + k_tile * BLOCK_K], a_bars.index(slot), a_s.index(slot), pred=ok)

    @gluon.jit
    def so2_gemm3x_wgmma_kernel(
        ad, wd, wlod, wscale_ptr, res_ptr, out_ptr, z_ptr, sigma_ptr, alpha_ptr,
        F, E, ROW, K_START, K_LEN, N_START, N_LEN, CF, LG, w_rows, w_stride_k,
        MODE: gl.constexpr, APPLY_ALPHA: gl.constexpr,
        BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr, num_warps: gl.constexpr,
        W_STAGES: gl.constexpr,
    ):
        """kernels.so2_gemm_kernel with DOT_PRECISION "3xfp16" (its docstring: arguments, modes,
        grid and program order), the activations through the descriptor ad (module docstring;
        tiles [BLOCK_M, BLOCK_K]), the weights through wd / wlod (heads / tails as 2-D
        (F * w_rows, N_W) tensors, tiles [BLOCK_K, BLOCK_N]) into a ring of W_STAGES slots,
        each K tile's requested W_STAGES - 1 tiles ahead (So2Config.num_stages);
        wscale_ptr (F, w_stride_k)."""
        a_layout: gl.constexpr = _a_layout(BLOCK_N, num_warps)
        mma: gl.constexpr = _mma_layout(BLOCK_N, num_warps)
        w_s, wlo_s, bars = _ring(wd, BLOCK_N, BLOCK_K, W_STAGES)
        a_s = gl.allocate_shared_memory(gl.float32, [A_STAGES, BLOCK_M, BLOCK_K], ad.layout)
        a_bars = gl.allocate_shared_memory(gl.int64, [A_STAGES, 1], mbarrier.MBarrierLayout())
        for s in gl.static_range(A_STAGES):
            mbarrier.init(a_bars.index(s), count=1)
        focus, edge0, n0 = _tile_of(E, N_LEN, BLOCK_M, BLOCK_N)
        n_k = K_LEN // BLOCK_K
        if MODE == BWD_HEAD:   # a edge-major (E, F * ROW): focus f's K columns start at f * ROW
            a_row0 = edge0.to(gl.int32)
            a_col0 = focus * ROW + K_START
            if APPLY_ALPHA:
                rows = gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, a_layout))
                a_alpha = gl.load(alpha_ptr + (edge0 + rows) * F + focus, mask=(edge0 + rows) < E,
                                  other=0.0).to(gl.float32)
        else:                  # a focus-major (F * E, ROW)
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
            _weight_tiles(wd, wlod, w_s, wlo_s, bars, w_row0, s, n_k, w_col0, BLOCK_K, BLOCK_N, W_STAGES)
        for i in range(n_k):
            slot = i % A_STAGES
            mbarrier.wait(a_bars.index(slot), (i // A_STAGES) & 1)
            a = a_s.index(slot).load(a_layout)
            if MODE == BWD_HEAD and APPLY_ALPHA:
                a = _head_g(a, a_alpha[:, None])
            # _k_step's CTA barrier comes after every warp's read of slot i % A_STAGES, so the
            # slot takes K tile i + A_STAGES after it
            acc, p = _k_step(acc, p, a, i, n_k, inv_col, w_s, wlo_s, bars, wd, wlod, w_row0,
                             w_col0, BLOCK_K, BLOCK_N, num_warps, W_STAGES)
            _a_tile(ad, a_s, a_bars, a_row0, a_col0, i + A_STAGES, n_k, A_STAGES, BLOCK_M, BLOCK_K)
        for s in gl.static_range(W_STAGES):
            mbarrier.invalidate(bars.index(s))
        for s in gl.static_range(A_STAGES):
            mbarrier.invalidate(a_bars.index(s))
        _epilogue(acc, out_ptr, res_ptr, z_ptr, sigma_ptr, alpha_ptr, F, E, ROW, CF, LG, N_START, N_LEN, focus,
                  edge0, n0, MODE, APPLY_ALPHA, BLOCK_M, BLOCK_N, num_warps)


def activation_descriptor(a: torch.Tensor, edge_major: bool, block_m: int, block_k: int):
    """The 2-D TMA descriptor over the float32 activations ``a`` for so2_gemm3x_wgmma_kernel:
    (F, E, ROW) focus-major read as (F * E, ROW), or with ``edge_major`` (E, F, ROW) read as
    (E, F * ROW), tiles [block_m, block_k]; None where the layout contract (module docstring)
    does not hold: contiguous, a 16-byte aligned base, rows a multiple of 16 bytes, and the
    tile coordinates inside int32."""
    if gluon is None or a.dtype != torch.float32 or a.dim() != 3 or not a.is_contiguous():
        return None
    rows, width = (a.shape[0], a.shape[1] * a.shape[2]) if edge_major else (a.shape[0] * a.shape[1], a.shape[2])
    if a.data_ptr() % 16 or (width * 4) % 16 or rows + block_m >= 2 ** 31 or width >= 2 ** 31:
        return None
    layout = gl.NVMMASharedLayout.get_default_for([block_m, block_k], gl.float32)
    return TensorDescriptor.from_tensor(a.view(rows, width), [block_m, block_k], layout)


def descriptors(w: torch.Tensor, w_lo: torch.Tensor, block_k: int, block_n: int):
    """The 2-D TMA descriptors over one layer's float16 weight heads and tails (F, K_W, N_W)
    for so2_gemm3x_wgmma_kernel, or None where the layout contract (module docstring) does not
    hold: contiguous, 16-byte aligned rows and bases."""
    if gluon is None:
        return None
    if not (w.is_contiguous() and w_lo.is_contiguous() and w.dtype == torch.float16 and w_lo.dtype == torch.float16
            and w.shape == w_lo.shape and w.dim() == 3):
        return None
    if (w.shape[-1] * 2) % 16 or w.data_ptr() % 16 or w_lo.data_ptr() % 16:
        return None
    layout = gl.NVMMASharedLayout.get_default_for([block_k, block_n], gl.float16)
    flat = (-1, w.shape[-1])
    return (TensorDescriptor.from_tensor(w.view(flat), [block_k, block_n], layout),
            TensorDescriptor.from_tensor(w_lo.view(flat), [block_k, block_n], layout))
