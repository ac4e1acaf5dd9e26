"""so2_mixing_stack launchers: tensors in, tensors out. Allocate, pick a config, launch.

Forward, per gated layer: the gate kernel (scalar block s, its activation, sigma) and the gated
GEMM over the m = 0 gated columns and the |m| = 1 columns (residual and gating in the
epilogue); then the final layer GEMM, stored edge-major with alpha.
Backward relay, per gated layer in reverse: sigma recompute -> pointwise (gz, gq) -> transposed-
weight GEMM with the residual. Weight gradients use batched GEMMs (torch, chunked over the edges:
``weight_grad``) over the materialised gz/gq and the inputs recovered backwards,
u_l = u_{l+1} - act(z_l).

Weight layout of the GEMMs: every GEMM kernel reads its weight tile (k, n) at
k * w_stride_k + n * w_stride_n and is fast when n, the tile's inner (fastest-varying) index,
has unit stride. The forward reads W (F, K, N) contiguous, so it does. The backward needs W^T;
reading it through W's swapped strides (n along W's slow axis) makes each backward GEMM launch
4.5x slower than a forward one on the H200, so ``backward`` makes contiguous copies
W^T = W.transpose(-1, -2).contiguous() of all layers once per call (~1 MB) and every
backward GEMM reads them with the forward's stride convention: the same products, read from
another address, accumulated in the same order, so the results are bitwise unchanged.
"""

from __future__ import annotations

import math

import torch

from ... import launches
from ...utils import cdiv, ieee_matmul
from . import compose
from .configs import EXACT, FP16X3, GATE_REGISTER_MAX, TF32X3, So2Config, cf_padded, fused_applies, heuristic
from .reference import So2Dims, gate_act


def _ieee(t: torch.Tensor) -> bool:
    return t.dtype == torch.float32


def _tf32_round(x: torch.Tensor) -> torch.Tensor:
    """kernels.tf32_round on a contiguous float32 tensor: the nearest TF32, truncated where
    rounding up would overflow."""
    bits = x.contiguous().view(torch.int32)
    rounded = (bits + 4096) & -8192
    rounded = torch.where((rounded & 0x7F800000) == 0x7F800000, bits & -8192, rounded)
    return rounded.view(torch.float32)


def split_tf32(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(W_hi, W_lo) of float32 ``w`` for the 3xtf32 GEMMs (configs.py): W_hi is w rounded to
    TF32, W_lo = w - W_hi (exact) rounded to TF32; contiguous. The kernel splits its
    activation tiles the same way (kernels.tf32_round)."""
    hi = _tf32_round(w)
    return hi, _tf32_round(w - hi)


def split_fp16(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(W_hi, W_lo, inv_scale) of float32 ``w`` (..., K, N), at any strides (the backward passes
    the transposed view W^T), for the 3xfp16 GEMMs (configs.py); one kernel launch
    (kernels.split_fp16_kernel).

    Each column n is scaled by a power of two s_n that puts its largest magnitude in
    [2**14, 2**15) (s_n clamped to [2**-126, 2**126]; a zero column takes 2**126), so w * s_n
    is exact and float16 holds its head without overflow: W_hi = float16(w s_n), W_lo =
    float16(w s_n - W_hi) (the remainder is exact in float32), both contiguous (..., K, N);
    inv_scale (..., N) float32 holds 1 / s_n. The GEMM kernel scales and splits its activation
    tiles per row the same way (kernels.pow2_row_scale)."""
    from .kernels import split_fp16_kernel
    *lead, K, N = w.shape
    hi = torch.empty(w.shape, dtype=torch.float16, device=w.device)
    lo = torch.empty_like(hi)
    inv = torch.empty((*lead, N), dtype=torch.float32, device=w.device)
    if inv.numel():                          # K = 0 too: the kernel writes zero columns' scales
        flat = w.reshape(math.prod(lead), K, N)   # a view for stacked weights and their W^T views
        split_fp16_kernel[(flat.shape[0], cdiv(N, 32))](
            flat, hi, lo, inv, K, N, flat.stride(0), flat.stride(1), flat.stride(2), BLOCK_K=64, BLOCK_N=32)
    return hi, lo, inv


def _weights(w: torch.Tensor, cfg: So2Config, transpose: bool = False):
    """What the layer GEMMs read for the stacked weights ``w`` (NL, F, K, N), or for their
    transposes W^T with ``transpose`` (the backward's): for the exact dots a tensor with unit
    stride along its last dim (``w`` as given, or ``transposed``'s copy of W^T); for a level-3
    split the tuple (heads, tails, inverse column scales or None) of ``split_tf32`` /
    ``split_fp16`` (the latter reads the W^T view itself: no transposed copy first). ``_layer``
    picks one layer of either form."""
    precision = cfg.dot_precision(w.dtype == torch.float32)
    if precision == FP16X3:
        return split_fp16(w.transpose(-1, -2) if transpose else w)
    w = transposed(w) if transpose else w
    if precision == TF32X3:
        return (*split_tf32(w), None)
    return w


def _layer(w, i: int):
    """Layer ``i`` of what ``_weights`` returned (a tensor, or a tuple of tensors and None)."""
    return tuple(None if p is None else p[i] for p in w) if isinstance(w, tuple) else w[i]


def tiled_grid(F: int, E: int, n_len: int, cfg: So2Config) -> tuple[int]:
    """The 1-D grid of so2_gemm_kernel and so2_bwd_fused_kernel over one column segment: a
    program per (focus, BLOCK_M-row block, BLOCK_N-column tile), a row block's column tiles
    consecutive (kernels._tile)."""
    return (F * cdiv(E, cfg.block_m) * cdiv(n_len, cfg.block_n),)


def _weight_parts(w, precision: str):
    """(heads, tails or None, inverse column scales or None) of one layer's weights as
    ``_layer`` gives them (a tensor, or a level-3 split's tuple), checked against the dots'
    ``precision``."""
    w, w_lo, w_scale = w if isinstance(w, tuple) else (w, None, None)
    if (w_lo is None) != (precision not in (TF32X3, FP16X3)) or (w_scale is None) != (precision != FP16X3):
        raise ValueError(f"so2 layer GEMM: {precision} dots got weights of another form")
    if w_scale is not None and (w_scale.stride(0) != w.stride(1) or w_scale.stride(1) != 1):
        raise ValueError("so2 layer GEMM: the column scales must be (F, N) rows as long as W's")
    return w, w_lo, w_scale


def _gemm(mode, a, w, res, out, d: So2Dims, cfg: So2Config, *, k_start, k_len, n_start, n_len,
          z=None, sigma=None, alpha=None, apply_alpha=False):
    """One column segment of a layer GEMM (see kernels.so2_gemm_kernel): acc = a_seg @ w with
    w (F, K, N) read at its own strides, element (k, n) at w[f, k, n]. Callers pass w with unit
    stride along n (the tile's inner index): W in the forward, the contiguous W^T in the
    backward (module docstring); for a level-3 split config, one layer of ``_weights``'s tuple
    (heads, tails, inverse column scales) instead."""
    from .kernels import so2_gemm_kernel
    precision = cfg.dot_precision(_ieee(a))
    w, w_lo, w_scale = _weight_parts(w, precision)
    F = w.shape[0]
    E = a.shape[0] * a.shape[1] // F      # a: (F, E, ROW), or (E, F, ROW) edge-major (BWD_HEAD)
    if n_len <= 0 or E == 0:
        return
    if cfg.wgmma and precision == FP16X3 and _gemm_wgmma(
            mode, a, w, w_lo, w_scale, res, out, z, sigma, alpha, apply_alpha, d, cfg, F, E, k_start, k_len,
            n_start, n_len):
        return
    so2_gemm_kernel[tiled_grid(F, E, n_len, cfg)](
        a, w, w if w_lo is None else w_lo, out if w_scale is None else w_scale, res, out,
        z if z is not None else out, sigma if sigma is not None else out, alpha if alpha is not None else out,
        F, E, d.row, k_start, k_len, n_start, n_len, d.focus_dim, d.lg,
        w.stride(0), w.stride(1), w.stride(2),
        MODE=mode, APPLY_ALPHA=apply_alpha, DOT_PRECISION=precision,
        BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k,
        num_warps=cfg.num_warps, num_stages=cfg.num_stages,
    )


def wgmma_applies(a, w, out, cfg: So2Config, k_len: int) -> bool:
    """Whether so2_gemm3x_wgmma_kernel runs a ``cfg.wgmma`` layer GEMM (else so2_gemm_kernel
    does, with the same bits): it can run on a's device (wgmma_kernels.available), float32
    activations and output, the weight tiles' K walk stays inside one focus's rows (k_len a
    multiple of BLOCK_K, itself a multiple of wgmma's 16), and a warp group takes 64 rows."""
    from . import wgmma_kernels
    return (a.dtype == torch.float32 and out.dtype == torch.float32 and w.dtype == torch.float16
            and cfg.block_k % 16 == 0 and k_len % cfg.block_k == 0 and cfg.num_warps % 4 == 0
            and cfg.block_m == 16 * cfg.num_warps and wgmma_kernels.available(a.device))


def _gemm_wgmma(mode, a, w, w_lo, w_scale, res, out, z, sigma, alpha, apply_alpha, d, cfg, F, E, k_start, k_len,
                n_start, n_len) -> bool:
    """_gemm through wgmma_kernels.so2_gemm3x_wgmma_kernel (So2Config.wgmma); False, having
    launched nothing, where it does not apply (wgmma_applies, or activations or weights outside
    the descriptors' layout)."""
    from . import wgmma_kernels
    from .kernels import BWD_HEAD
    if not wgmma_applies(a, w, out, cfg, k_len):
        return False
    descs = wgmma_kernels.descriptors(w, w_lo, cfg.block_k, cfg.block_n)
    ad = wgmma_kernels.activation_descriptor(a, mode == BWD_HEAD, cfg.block_m, cfg.block_k)
    if descs is None or ad is None:
        return False
    wgmma_kernels.so2_gemm3x_wgmma_kernel[tiled_grid(F, E, n_len, cfg)](
        ad, *descs, w_scale, res, out,
        z if z is not None else out, sigma if sigma is not None else out, alpha if alpha is not None else out,
        F, E, d.row, k_start, k_len, n_start, n_len, d.focus_dim, d.lg, w.shape[1], w_scale.stride(0),
        MODE=getattr(mode, "value", mode), APPLY_ALPHA=apply_alpha,   # the kernels' modes are tl.constexprs
        BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k, num_warps=cfg.num_warps,
        W_STAGES=cfg.num_stages,
    )
    launches.record("so2_gemm3x_wgmma")
    return True


def forward(u0, alpha, w0_all, w1_all, gw_all, d: So2Dims, apply_alpha: bool, config: So2Config | None = None):
    """Returns (x_local (E, F, ROW), z_all (NG, F, E, ROW), u_final (F, E, ROW)). The layer
    GEMMs take ``config``'s tiles and precision (default: the heuristic relay's, exact), or
    cuBLAS's with a ``compose`` config (compose.gated_layer, compose.final: the gate kernel
    still takes its scalar block); the fused route is the backward's only."""
    from .kernels import FINAL, FWD_GATED, so2_fwd_gate_kernel
    cfg = config or heuristic(d.lmax, d.focus_dim)
    F, E, _ = u0.shape
    ng = gw_all.shape[0]
    u = u0.contiguous()
    z_all = torch.empty((ng, F, E, d.row), dtype=u0.dtype, device=u0.device)
    x_local = torch.empty((E, F, d.row), dtype=u0.dtype, device=u0.device)
    if E == 0:
        return x_local, z_all, u
    sigma = torch.empty((F, E, d.lg), dtype=torch.float32, device=u0.device)
    w0c, w1c, gwc = w0_all.contiguous(), w1_all.contiguous(), gw_all.contiguous()
    w0g, w1g = _weights(w0c, cfg), _weights(w1c, cfg)
    gate_precision = cfg.gate_precision(_ieee(u))
    for layer in range(ng):
        u_next = torch.empty_like(u)
        z = z_all[layer]
        # The gate's scalar block reads W0 as the layer GEMMs do where it takes their split
        # (the split's heads, tails and column scales), else W0 itself.
        w0s = _weight_parts(_layer(w0g, layer), FP16X3) if gate_precision == FP16X3 else (w0c[layer],) * 3
        so2_fwd_gate_kernel[(F * cdiv(E, GATE_BLOCK_M),)](
            u, *w0s, gwc[layer], z, u_next, sigma, E, d.row, d.m0, d.lg, d.focus_dim,
            IEEE=_ieee(u), S_PRECISION=gate_precision, BLOCK_M=GATE_BLOCK_M, CF_P=cf_padded(d.focus_dim),
            BLOCK_K=cfg.block_k, num_warps=gate_warps(d.focus_dim, gate_precision),
        )
        if cf_padded(d.focus_dim) > GATE_REGISTER_MAX:
            # the gate kernel left sigma to the sigma kernel (configs.GATE_REGISTER_MAX), which
            # reads s from the z it wrote: the backward's recompute, bit for bit
            _sigma(z, gwc[layer], sigma, d)
        if cfg.compose:
            compose.gated_layer(u, w0c[layer], w1c[layer], z, u_next, sigma, d)
        else:
            common = dict(z=z, sigma=sigma)
            _gemm(FWD_GATED, u, _layer(w0g, layer), u, u_next, d, cfg, k_start=0, k_len=d.m0,
                  n_start=d.focus_dim, n_len=d.m0 - d.focus_dim, **common)
            _gemm(FWD_GATED, u, _layer(w1g, layer), u, u_next, d, cfg, k_start=d.m0, k_len=d.m1,
                  n_start=d.m0, n_len=d.m1, **common)
        launches.record("so2_fwd_layer")
        u = u_next
    alpha_c = alpha.contiguous()
    if cfg.compose:
        compose.final(u, w0c[ng], w1c[ng], alpha_c, x_local, d, apply_alpha)
    else:
        for w, k_start, k_len in ((_layer(w0g, ng), 0, d.m0), (_layer(w1g, ng), d.m0, d.m1)):
            _gemm(FINAL, u, w, u, x_local, d, cfg, k_start=k_start, k_len=k_len, n_start=k_start, n_len=k_len,
                  alpha=alpha_c, apply_alpha=apply_alpha)
    launches.record("so2_fwd_final")
    return x_local, z_all, u


def transposed(w: torch.Tensor) -> torch.Tensor:
    """W^T over the last two dims, contiguous: what the backward GEMMs read (module docstring).
    A copy unless ``w`` already stores W^T contiguously (then the view itself)."""
    return w.transpose(-1, -2).contiguous()


def _gemm_t(a, w0t, w1t, res, out, d, cfg, head=None):
    """out = res + [a_m0 @ w0^T | a_m1 @ w1^T] (both segments), given w0t = W0^T, w1t = W1^T
    (F, M, M) with unit stride along the last dim (``transposed``); for a level-3 split config
    one layer of their ``_weights`` tuples. The composition route's config takes cuBLAS
    instead (compose.gemm_t). ``head`` = (alpha, apply_alpha): a and res are grad_out (E, F,
    ROW), read as the head's g = grad_out * alpha (so2_gemm_kernel's BWD_HEAD); Triton only."""
    if cfg.compose:
        return compose.gemm_t(a, w0t, w1t, res, out, d)
    from .kernels import BWD, BWD_HEAD
    mode, extra = (BWD, {}) if head is None else (BWD_HEAD, dict(alpha=head[0], apply_alpha=head[1]))
    _gemm(mode, a, w0t, res, out, d, cfg, k_start=0, k_len=d.m0, n_start=0, n_len=d.m0, **extra)
    _gemm(mode, a, w1t, res, out, d, cfg, k_start=d.m0, k_len=d.m1, n_start=d.m0, n_len=d.m1, **extra)


# The relay's sigma kernel has its own launch shape, not the GEMM config's: at Cf 64 its IEEE
# gate dots ran 15x slower with 8 rows per warp (the heuristic's 32 rows on 4 warps: 8.7 ms a
# call at (400000, 2, 64), a third of the whole step; 16 on 2 warps and 64 on 8 alike) than
# with 4 or 16 (0.55-0.61 ms), where Cf 32 does not care (0.33-0.48 ms); 64 rows on 4 warps is
# within 7% of the best at both (benchmarks/results/2026-12-01-h200-h, runs 7-8). sigma is
# bitwise the same for every launch shape (each element is one fixed-order dot), so the fused
# kernel's bitwise contract with the relay is untouched.
SIGMA_BLOCK_M = 64
SIGMA_WARPS = 4
# The backward head (no dots: a scaled transposing copy and a row sum) has its own too: at Neo
# (647000, 3, 32) 16 rows on 4 warps ran at the copy ceiling, 1.166 ms against 1.477 ms with the
# GEMM config's 64 rows (results/2026-12-01-h200-m, run 12). Its outputs do not depend on the
# row block (each grad_alpha row sums its BLOCK_C chunks in order; checked bitwise there), and
# both backward routes run the same head.
HEAD_BLOCK_M = 16
HEAD_WARPS = 4
# The forward gate and the relay's pointwise kernel (a few small IEEE dots and element-wise
# work) too: 32 rows on 2 warps (16 rows a warp, where the sigma kernel's IEEE-dot cliff came
# with 8). At the three benchmark shapes (results/2026-12-02-h200-n, run 1) the GEMM config's
# 64 rows on 4 warps took 1.01-1.24x (gate) and 1.05-1.06x (pointwise) as long. The pointwise
# kernel was the fastest or within 1% of it everywhere; the gate was at (300000, 6, 32) and
# (400000, 2, 64), and at Neo 32 rows on 4 warps were 1.16x faster still, but 1.20x slower at
# Cf 64 (8 rows a warp). Their outputs do not depend on the row block or the warps (checked
# bitwise there), so neither the fused kernel's bitwise contract with the relay nor the forward
# changes. The gate's warps follow gate_warps.
GATE_BLOCK_M = 32
POINTWISE_BLOCK_M, POINTWISE_WARPS = 32, 2


def pointwise_warps(focus_dim: int) -> int:
    """POINTWISE_WARPS, or 4 above configs.GATE_REGISTER_MAX, where the kernel's (BLOCK_M,
    CF_P) accumulator and gw^T rows are 128 columns wide."""
    return POINTWISE_WARPS if cf_padded(focus_dim) <= GATE_REGISTER_MAX else 4


def gate_warps(focus_dim: int, s_precision: str) -> int:
    """Warps of the forward gate kernel's 32-row launch: 4 where its scalar block s is exact
    at Cf 32, else 2. Measured on the H200 (results/2026-12-02-h200-q run 4, ms a call, 2 / 4
    warps): exact s at Cf 32, 0.889 / 0.757 at Neo and 0.633 / 0.626 at (300000, 6, 32); at Cf
    64 1.236 / 1.501 at (400000, 2, 64); s in 3xfp16 0.851 / 0.914, 0.608 / 0.711 and
    1.114 / 1.191. Other Cf were not measured and keep 2."""
    return 4 if s_precision == EXACT and cf_padded(focus_dim) == 32 else 2


def _sigma(z, gw, sigma, d: So2Dims) -> None:
    """sigma (F, E, LG) float32 of one gated layer, recomputed from its saved z (the relay's
    sigma kernel; the fused route's sigma pass runs the same launch)."""
    from .kernels import so2_bwd_sigma_kernel
    F, E = z.shape[0], z.shape[1]
    so2_bwd_sigma_kernel[(F * cdiv(E, SIGMA_BLOCK_M),)](z, gw, sigma, E, d.row, d.lg, d.focus_dim, IEEE=_ieee(z),
                                                       BLOCK_M=SIGMA_BLOCK_M, CF_P=cf_padded(d.focus_dim),
                                                       num_warps=SIGMA_WARPS, num_stages=1)


def relay_layer(g_cur, z, gw, w0t, w1t, out, sigma, gz, gq, d: So2Dims, cfg: So2Config):
    """One gated layer's relay: sigma (F, E, LG) recomputed from z; gz (F, E, ROW) and, when
    ``gq`` is given, gq (F, E, LG); then out = g_cur + [gz_m0 @ w0^T | gz_m1 @ w1^T], given the
    layer's w0t = W0^T and w1t = W1^T (``transposed``; for a level-3 split their ``_weights``
    tuples, ``_gemm_t``), by so2_gemm_kernel, or by cuBLAS for a ``compose`` config (compose.py)."""
    from .kernels import so2_bwd_pointwise_kernel
    F, E = g_cur.shape[0], g_cur.shape[1]
    # num_stages=1 (here and in _sigma): the group loop needs no software pipelining
    # (memory-bound, one program per BLOCK_M edges); Triton's default of 3 stages asked for
    # 368 KiB of shared memory at focus_dim 96-128 on the H200 (limit 227 KiB).
    _sigma(z, gw, sigma, d)
    so2_bwd_pointwise_kernel[(F * cdiv(E, POINTWISE_BLOCK_M),)](
        g_cur, z, sigma, gw, gz, sigma if gq is None else gq, E, d.row, d.m0, d.lg, d.focus_dim,
        WRITE_GQ=gq is not None, IEEE=_ieee(z), BLOCK_M=POINTWISE_BLOCK_M, CF_P=cf_padded(d.focus_dim),
        num_warps=pointwise_warps(d.focus_dim), num_stages=1)
    _gemm_t(gz, w0t, w1t, g_cur, out, d, cfg)


def fused_layer(g_cur, z, gw, w0t, w1t, out, d: So2Dims, cfg: So2Config, sigma=None):
    """out = g_cur + [gz_m0 @ w0^T | gz_m1 @ w1^T] by the fused kernel: two passes over
    disjoint column segments (the m = 0 pass carries the scalar chain), given the layer's w0t =
    W0^T and w1t = W1^T (``transposed``; for 3xfp16 their ``_weights`` tuples). With
    ``cfg.sigma_pass`` the relay's sigma kernel writes sigma (F, E, LG) float32 into ``sigma``
    (allocated here when None) first and the fused kernel reads it; else every program
    recomputes it."""
    from .kernels import so2_bwd_fused_kernel
    F, E = g_cur.shape[0], g_cur.shape[1]
    if cfg.sigma_pass:
        if sigma is None:
            sigma = torch.empty((F, E, d.lg), dtype=torch.float32, device=g_cur.device)
        _sigma(z, gw, sigma, d)
        launches.record("so2_bwd_sigma_pass")
    precision = cfg.dot_precision(_ieee(g_cur))
    for wt, start, length, seg_m0 in ((w0t, 0, d.m0, True), (w1t, d.m0, d.m1, False)):
        w, w_lo, w_scale = _weight_parts(wt, precision)
        so2_bwd_fused_kernel[tiled_grid(F, E, length, cfg)](
            g_cur, z, gw, sigma if cfg.sigma_pass else out, w, w if w_lo is None else w_lo,
            out if w_scale is None else w_scale, out, E, d.row, d.m0, d.lg, start, length, start, length,
            w.stride(0), w.stride(1), w.stride(2),
            SEGMENT_M0=seg_m0, SIGMA_LOADED=cfg.sigma_pass, DOT_PRECISION=precision, BLOCK_M=cfg.block_m,
            BLOCK_N=cfg.block_n, CF_P=d.focus_dim, num_warps=cfg.num_warps, num_stages=cfg.num_stages,
        )
    launches.record("so2_bwd_fused_layer")


# Weight gradients contract over the edges: (K x E) @ (E x N) per focus stream, K and N at most a
# few hundred, E up to millions. As one GEMM per focus stream that leaves the GEMM library a few
# output tiles for the whole GPU (2 x 1 of 128 x 128 for dw0 at Neo), so the edges are cut into
# chunks of at least WGRAD_CHUNK_ROWS, at most WGRAD_MAX_CHUNKS of them, each chunk one GEMM of
# a batch, and the chunks' float32 partials are summed (a shorter float32 chain than one E-long
# dot; results/2026-12-01-h200-l run 10 times it). 16-bit inputs keep one GEMM (their partials
# would round to 16 bits before the sum).
WGRAD_CHUNK_ROWS = 4096
WGRAD_MAX_CHUNKS = 128


def weight_grad(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """out (F, K, N) = sum over e of a[:, e, :]^T b[:, e, :], for a (F, E, K) and b (F, E, N)
    with unit stride along their last dim (column slices of (F, E, ROW) surfaces are views
    here: no copy). Chunked over E as WGRAD_CHUNK_ROWS says; returns ``out``. IEEE float32
    GEMMs whatever the caller's matmul precision or autocast (utils.ieee_matmul)."""
    n_focus, n_edges = a.shape[0], a.shape[1]
    chunks = min(WGRAD_MAX_CHUNKS, n_edges // WGRAD_CHUNK_ROWS)
    with ieee_matmul(a.device.type):   # and autocast off: its 16-bit GEMMs would round the sums
        if chunks < 2 or a.dtype != torch.float32:
            return torch.matmul(a.transpose(-1, -2), b, out=out)
        rows = n_edges // chunks
        main = chunks * rows
        for f in range(n_focus):
            a_f, b_f = a[f, :main].unflatten(0, (chunks, rows)), b[f, :main].unflatten(0, (chunks, rows))
            torch.sum(torch.bmm(a_f.transpose(1, 2), b_f), dim=0, out=out[f])
        if main < n_edges:
            out += a[:, main:].transpose(-1, -2) @ b[:, main:]
    return out


def backward(grad_out, x_local, z_all, u_final, alpha, w0_all, w1_all, gw_all, d: So2Dims,
             apply_alpha: bool, weight_grads: bool, config: So2Config | None = None, alpha_grad: bool = True):
    """(grad_u0 (F, E, ROW), grad_alpha (E, F), (dw0_all, dw1_all, dgw_all) or None).

    ``alpha_grad`` False (alpha needs no gradient): grad_alpha is zeros, and the head kernel,
    which sums it, runs only where g is stored (the first GEMM otherwise applies alpha itself);
    grad_u0 and the weight gradients are the same bits either way.

    Each gated layer runs the relay, the fused kernel when ``config.fused`` (the caller, op.py,
    checks the fused guards), or the composition route when ``config.compose`` (the relay's
    pointwise kernels, cuBLAS GEMMs: compose.py). Weight gradients need gz/gq in memory: relay
    or composition.
    """
    from .kernels import so2_bwd_head_kernel
    cfg = config or heuristic(d.lmax, d.focus_dim)
    if cfg.fused and not fused_applies(cfg, d.focus_dim, grad_out.dtype == torch.float32, weight_grads):
        raise ValueError(f"so2_mixing_stack: fused backward config {cfg.name} does not apply here "
                         f"(focus_dim {d.focus_dim}, {grad_out.dtype}, weight_grads={weight_grads})")
    E, F, _ = grad_out.shape
    ng = gw_all.shape[0]
    dt, dev = grad_out.dtype, grad_out.device
    # Gradients are allocated contiguous, whatever the strides of the tensors they belong to:
    # the head kernel writes grad_alpha as a contiguous (E, F) matrix (a zeros_like of a
    # transposed alpha would keep its strides and get the wrong elements), and contiguous is
    # what the custom op's fake promises. With E > 0 every element is written below (the head
    # kernel writes all of grad_alpha when it applies alpha; each weight-gradient layer slot is
    # assigned), so only what stays zero is zero-filled.
    store_g = weight_grads or cfg.compose
    sum_alpha = apply_alpha and (alpha_grad or store_g)   # the head kernel runs and writes grad_alpha
    grad_alpha = (torch.empty if sum_alpha and E else torch.zeros)(alpha.shape, dtype=alpha.dtype, device=dev)
    new_dw = torch.empty if E else torch.zeros
    dws = tuple(new_dw(w.shape, dtype=w.dtype, device=dev) for w in (w0_all, w1_all, gw_all)) \
        if weight_grads else None
    if E == 0:
        return torch.zeros((F, 0, d.row), dtype=dt, device=dev), grad_alpha, dws
    # The kernels read every tensor as contiguous: a copy only where it is not (e.g. the
    # expanded stride-0 grad_out of ``out.sum().backward()``); a no-op on the hot path. The
    # weights are read transposed: W^T copies of all layers at once, a real copy each call (of
    # NL * F * (M0^2 + M1^2) elements: 1.3 MB fp32 at lmax 3, Cf 32, F 2, NL 3) unless the
    # caller stores W^T (module docstring); a level-3 split reads the W^T view itself.
    w0t, w1t = _weights(w0_all, cfg, transpose=True), _weights(w1_all, cfg, transpose=True)
    gwc = gw_all.contiguous()
    z_all, u_final = z_all.contiguous(), u_final.contiguous()
    # The head's g = grad_out * alpha, focus-major, is stored only where something other than
    # the first GEMM reads it: the weight gradients, and the composition route's cuBLAS GEMM.
    # Elsewhere that GEMM reads grad_out itself (BWD_HEAD: the same g, never written), and the
    # head only sums grad_alpha.
    grad_out_c, alpha_c = grad_out.contiguous(), alpha.contiguous()
    g = torch.empty((F, E, d.row), dtype=dt, device=dev) if store_g else None
    if store_g or sum_alpha:
        so2_bwd_head_kernel[(F * cdiv(E, HEAD_BLOCK_M),)](
            grad_out_c, x_local.contiguous(), alpha_c, grad_out_c if g is None else g, grad_alpha, F, E, d.row,
            APPLY_ALPHA=apply_alpha, WRITE_G=store_g, BLOCK_M=HEAD_BLOCK_M, BLOCK_C=128, num_warps=HEAD_WARPS)
    if weight_grads:
        weight_grad(u_final[..., :d.m0], g[..., :d.m0], dws[0][ng])
        weight_grad(u_final[..., d.m0:], g[..., d.m0:], dws[1][ng])
    g_cur = torch.empty((F, E, d.row), dtype=dt, device=dev)
    if store_g:
        _gemm_t(g, _layer(w0t, ng), _layer(w1t, ng), g, g_cur, d, cfg)
    else:
        _gemm_t(grad_out_c, _layer(w0t, ng), _layer(w1t, ng), grad_out_c, g_cur, d, cfg, head=(alpha_c, apply_alpha))
    # The relay's intermediates (the fused kernel keeps gz in registers; sigma too unless the
    # config has the sigma pass).
    sigma = torch.empty((F, E, d.lg), dtype=torch.float32, device=dev) if not cfg.fused or cfg.sigma_pass else None
    if not cfg.fused:
        gz = torch.empty_like(g_cur)
        gq = torch.empty((F, E, d.lg), dtype=torch.float32, device=dev) if weight_grads else None
    u_next = u_final
    for layer in range(ng - 1, -1, -1):
        z = z_all[layer]
        # The composition route accumulates a layer's GEMM onto g_cur itself (compose.gemm_t),
        # which nothing reads after it: g_cur is this function's own buffer (the first
        # GEMM's output, or a layer's).
        g_next = g_cur if cfg.compose else torch.empty_like(g_cur)
        if cfg.fused:
            fused_layer(g_cur, z, gwc[layer], _layer(w0t, layer), _layer(w1t, layer), g_next, d, cfg, sigma)
            g_cur = g_next
            continue
        relay_layer(g_cur, z, gwc[layer], _layer(w0t, layer), _layer(w1t, layer), g_next, sigma, gz, gq, d, cfg)
        if weight_grads:
            with ieee_matmul(z.device.type):   # the gate's s @ gw in IEEE fp32 too (precision, autocast)
                u_l = u_next - gate_act(z, gwc[layer], d)[0]
            weight_grad(u_l[..., :d.m0], gz[..., :d.m0], dws[0][layer])
            weight_grad(u_l[..., d.m0:], gz[..., d.m0:], dws[1][layer])
            weight_grad(z[..., :d.focus_dim], gq.to(dt), dws[2][layer])
            u_next = u_l
        launches.record(f"so2_bwd_{cfg.route}_layer")
        g_cur = g_next
    return g_cur, grad_alpha, dws
