"""Triton kernels for so2_mixing_stack. Only ``@triton.jit`` code; launch.py launches.

Activations are focus-major (F, E, ROW) contiguous; a program owns one focus f and BLOCK_M
consecutive edges. Column layout (docs/specs/so2_mixing_stack.md): [0, CF) scalars s, [CF, M0) the
gated m = 0 sub-tiles, [M0, M0 + LG) the m = -1 stripe, [M0 + LG, ROW) the m = +1 stripe; gate
column of an output column c >= CF is (c - CF) % LG. CF_P is CF rounded up to a power of two
(>= 16, tl.dot's minimum); padded lanes are masked to zero.

fp32 dots use ``input_precision="ieee"`` (no TF32): the spec's accuracy contract; only a
level-3 config's layer GEMMs take tensor-core products of split operands (3xTF32 or 3xFP16:
so2_gemm_kernel's DOT_PRECISION). Sums are accumulated in float32 whatever the input dtype.
Offsets are int64 (so2_gemm_kernel's offsets within a tile, below BLOCK_M * ROW, are int32 from
an int64 base).
"""

import triton
import triton.language as tl

from ..triton_common import dot_f32acc, mul_rn, sigmoid_f32, to_output
from . import configs

FWD_GATED = tl.constexpr(0)   # z = u_seg @ W; u_next = u + z * sigma[gate col]
FINAL = tl.constexpr(1)       # y = (u + u_seg @ W) * alpha, stored edge-major
BWD = tl.constexpr(2)         # g_next = g_cur + gz_seg @ W^T (the launcher passes a contiguous W^T)
BWD_HEAD = tl.constexpr(3)    # BWD with g_cur = grad_out * alpha read edge-major (the head's g, never stored)


@triton.jit
def _row_block(pid, E, BLOCK_M: tl.constexpr):
    """(focus, int64 index of the first edge) of program ``pid``'s row block, over
    F * cdiv(E, BLOCK_M) programs."""
    n_row_blocks = tl.cdiv(E, BLOCK_M)
    return pid // n_row_blocks, (pid % n_row_blocks).to(tl.int64) * BLOCK_M


@triton.jit
def _tile(pid, E, N_LEN, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """(focus, int64 index of the first edge, first column offset) of program ``pid`` of a
    column-tiled kernel, over F * cdiv(E, BLOCK_M) * cdiv(N_LEN, BLOCK_N) programs (launch.
    tiled_grid). A row block's column tiles are consecutive programs, so they run at about the
    same time and the second and later read the row block's operand rows from L2 (with the
    column tile as the grid's slow dimension, each column tile would stream the whole operand
    from DRAM again: 2-3x the A bytes of a layer GEMM)."""
    n_tiles = tl.cdiv(N_LEN, BLOCK_N)
    focus, edge0 = _row_block(pid // n_tiles, E, BLOCK_M)
    return focus, edge0, (pid % n_tiles) * BLOCK_N


@triton.jit
def _rows(pid, E, BLOCK_M: tl.constexpr):
    """(focus, int64 edge indices, edge mask) of program ``pid`` over F * cdiv(E, BLOCK_M)."""
    focus, edge0 = _row_block(pid, E, BLOCK_M)
    edges = edge0 + tl.arange(0, BLOCK_M)
    return focus, edges, edges < E


@triton.jit
def gate_sigma_group(s, gw_ptr, focus, g0, CF, LG, CF_P: tl.constexpr, IEEE: tl.constexpr):
    """sigma[:, g0:g0+CF] = sigmoid(s @ gw[:, g0:g0+CF]) for one gate group, float32.

    s: (BLOCK_M, CF_P) float32 with zero padding; gw_ptr: (F, CF, LG). Every kernel that needs
    sigma calls this, so recompute and relay agree bit for bit.
    """
    k = tl.arange(0, CF_P)
    j = tl.arange(0, CF_P)
    mask = (k < CF)[:, None] & (j < CF)[None, :]
    w = tl.load(gw_ptr + focus.to(tl.int64) * CF * LG + k[:, None] * LG + (g0 + j)[None, :],
                mask=mask, other=0.0).to(tl.float32)
    return sigmoid_f32(dot_f32acc(s, w, tl.zeros((s.shape[0], w.shape[1]), tl.float32), IEEE))


# Above configs.GATE_REGISTER_MAX (the padded focus_dim) the gate dots take GATE_CHUNK of their
# K (sigma's s @ gw) or of a group's columns (the pointwise kernel's gq @ gw^T) at a time.
GATE_REGISTER_MAX = tl.constexpr(configs.GATE_REGISTER_MAX)
GATE_CHUNK = tl.constexpr(32)


@triton.jit
def gate_sigma_chunked(z_ptr, row, emask, gw_ptr, focus, g0, cols, cmask, CF, LG, CF_P: tl.constexpr,
                       IEEE: tl.constexpr):
    """gate_sigma_group for CF_P > GATE_REGISTER_MAX: s read from z (rows ``row``) GATE_CHUNK
    columns at a time, each chunk's dot accumulating onto the last in K order."""
    acc = tl.zeros((row.shape[0], CF_P), dtype=tl.float32)
    gw_base = gw_ptr + focus.to(tl.int64) * CF * LG
    for k0 in range(0, CF, GATE_CHUNK):
        k = k0 + tl.arange(0, GATE_CHUNK)
        kmask = k < CF
        s = tl.load(z_ptr + row[:, None] + k[None, :], mask=emask[:, None] & kmask[None, :],
                    other=0.0).to(tl.float32)
        w = tl.load(gw_base + k[:, None] * LG + (g0 + cols)[None, :], mask=kmask[:, None] & cmask[None, :],
                    other=0.0).to(tl.float32)
        acc = dot_f32acc(s, w, acc, IEEE)
    return sigmoid_f32(acc)


@triton.jit
def so2_fwd_gate_kernel(
    u_ptr, w0_ptr, w0lo_ptr, w0scale_ptr, gw_ptr, z_ptr, u_next_ptr, sigma_ptr,
    E, ROW, M0, LG, CF,
    IEEE: tl.constexpr, S_PRECISION: tl.constexpr, BLOCK_M: tl.constexpr, CF_P: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    """The scalar block of one gated layer, and its gate.

    u_ptr: (F, E, ROW) layer input. w0_ptr: (F, M0, M0) this layer's m = 0 weights.
    gw_ptr: (F, CF, LG). Writes z[..., :CF] = s = u_m0 @ w0[:, :CF],
    u_next[..., :CF] = u + s * sigmoid(s), and sigma (F, E, LG) = sigmoid(s @ gw) (float32;
    for CF_P > GATE_REGISTER_MAX not here: launch.py runs so2_bwd_sigma_kernel on z after it).
    S_PRECISION: how s's K tiles are multiplied, by the layer GEMMs' tile_product: "ieee" or
    "tf32" (16-bit inputs) on W0 itself, or "3xfp16" (w0_ptr / w0lo_ptr the float16 heads and
    tails of W0 scaled per column, w0scale_ptr (F, M0) the inverse scales: launch.split_fp16,
    the layer GEMMs' split weights). The gate dots s @ gw take the IEEE flag whatever
    S_PRECISION is, as the backward's sigma recompute does (so2_bwd_sigma_kernel): IEEE dots
    for fp32 inputs; for 16-bit ones TF32 dots, which round this fp32 s where the backward's
    s, read from the 16-bit z, is exact in TF32. Grid: F * cdiv(E, BLOCK_M).
    """
    focus, edges, emask = _rows(tl.program_id(0), E, BLOCK_M)
    row_base = focus.to(tl.int64) * E * ROW + edges * ROW
    cols = tl.arange(0, CF_P)
    cmask = cols < CF
    acc = tl.zeros((BLOCK_M, CF_P), dtype=tl.float32)
    w_base = focus.to(tl.int64) * M0 * M0
    inv_col = column_scales(w0scale_ptr, focus, M0, cols, cmask, S_PRECISION)
    for k0 in range(0, M0, BLOCK_K):
        k = k0 + tl.arange(0, BLOCK_K)
        a = tl.load(u_ptr + row_base[:, None] + k[None, :], mask=emask[:, None] & (k < M0)[None, :],
                    other=0.0).to(tl.float32)
        w_offs = w_base + k[:, None] * M0 + cols[None, :]
        wmask = (k < M0)[:, None] & cmask[None, :]
        w = tl.load(w0_ptr + w_offs, mask=wmask, other=0.0)
        w_lo = w
        if S_PRECISION == "3xfp16":
            w_lo = tl.load(w0lo_ptr + w_offs, mask=wmask, other=0.0)
        acc = tile_product(acc, a, w, w_lo, inv_col, S_PRECISION)
    mask = emask[:, None] & cmask[None, :]
    offs = row_base[:, None] + cols[None, :]
    u = tl.load(u_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(z_ptr + offs, to_output(acc, z_ptr), mask=mask)
    tl.store(u_next_ptr + offs, to_output(u + acc * sigmoid_f32(acc), u_next_ptr), mask=mask)
    if CF_P <= GATE_REGISTER_MAX:   # else launch.py runs the sigma kernel on the z written here
        sig_base = focus.to(tl.int64) * E * LG + edges * LG
        for g0 in range(0, LG, CF):
            sigma = gate_sigma_group(acc, gw_ptr, focus, g0, CF, LG, CF_P, IEEE)
            tl.store(sigma_ptr + sig_base[:, None] + (g0 + cols)[None, :], sigma, mask=mask)


@triton.jit
def tf32_round(x):
    """x rounded to the nearest TF32 (sign, exponent, 10 mantissa bits; ties away from zero),
    float32 in and out. Where rounding up would leave the finite range (|x| within 2**-11 of
    float32's largest value) x is truncated instead, so a finite x never becomes infinite."""
    bits = x.to(tl.int32, bitcast=True)
    rounded = (bits + 4096) & -8192
    rounded = tl.where((rounded & 0x7F800000) == 0x7F800000, bits & -8192, rounded)
    return rounded.to(tl.float32, bitcast=True)


@triton.jit
def pow2_scale(amax):
    """(s, 1/s) for magnitudes ``amax`` >= 0: powers of two with amax * s in [2**14, 2**15),
    so x * s is exact for |x| <= amax and fits float16 (largest finite 65504) with its head
    rounded to 11 bits; clamped to [2**-126, 2**126] (amax 0 or below 2**-112 takes
    s = 2**126; an inf or NaN amax a tiny s). The splits' tails (x - head) of an inf are
    NaN, so a level-3 product that the exact path gives as +-inf comes out NaN: non-finite
    either way, its kind not kept."""
    exponent = (amax.to(tl.int32, bitcast=True) >> 23) & 0xFF      # biased: amax in [2**(e-127), 2**(e-126))
    biased = tl.minimum(tl.maximum(268 - exponent, 1), 253)       # s = 2**(141 - e)
    return (biased << 23).to(tl.float32, bitcast=True), ((254 - biased) << 23).to(tl.float32, bitcast=True)


@triton.jit
def pow2_row_scale(a):
    """pow2_scale per row of the float32 tile ``a``: (s, 1/s) of max|a_row|."""
    return pow2_scale(tl.max(tl.abs(a), axis=1))


@triton.jit
def split_fp16_kernel(w_ptr, hi_ptr, lo_ptr, inv_ptr, K, N, stride_b, stride_k, stride_n,
                      BLOCK_K: tl.constexpr, BLOCK_N: tl.constexpr):
    """The 3xfp16 split of float32 weights (launch.split_fp16): for matrix b of w (B, K, N),
    read at its strides (a transposed view too), columns [n0, n0 + BLOCK_N): s = pow2_scale of
    the column's max magnitude, hi = float16(w s), lo = float16(w s - hi) (the remainder is
    exact in float32), both written contiguous (B, K, N); inv (B, N) = 1 / s.
    Grid: (B, cdiv(N, BLOCK_N)); two passes over K (the column maxima, then the split)."""
    b = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_ok = cols < N
    src = w_ptr + b * stride_b + cols[None, :].to(tl.int64) * stride_n
    amax = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        ks = k0 + tl.arange(0, BLOCK_K)
        ok = (ks[:, None] < K) & col_ok[None, :]
        tile = tl.load(src + ks[:, None].to(tl.int64) * stride_k, mask=ok, other=0.0)
        amax = tl.maximum(amax, tl.max(tl.abs(tile), axis=0))
    scale, inv = pow2_scale(amax)
    dst = b * K * N + cols[None, :]
    for k0 in range(0, K, BLOCK_K):
        ks = k0 + tl.arange(0, BLOCK_K)
        ok = (ks[:, None] < K) & col_ok[None, :]
        scaled = tl.load(src + ks[:, None].to(tl.int64) * stride_k, mask=ok, other=0.0) * scale[None, :]
        hi = scaled.to(tl.float16)
        at = dst + ks[:, None].to(tl.int64) * N
        tl.store(hi_ptr + at, hi, mask=ok)
        tl.store(lo_ptr + at, (scaled - hi.to(tl.float32)).to(tl.float16), mask=ok)
    tl.store(inv_ptr + b * N + cols, inv, mask=col_ok)


@triton.jit
def column_scales(wscale_ptr, focus, w_stride_k, cols, cmask, DOT_PRECISION: tl.constexpr):
    """A 3xfp16 weight's inverse column scales (launch.split_fp16) for the tile's columns
    ``cols`` of ``focus`` (rows of w_stride_k scales); ones (unread) for the other precisions."""
    if DOT_PRECISION == "3xfp16":
        return tl.load(wscale_ptr + focus.to(tl.int64) * w_stride_k + cols, mask=cmask, other=0.0)
    else:
        return tl.full(cols.shape, 1.0, tl.float32)


@triton.jit
def tile_product(acc, a, w, w_lo, inv_col, DOT_PRECISION: tl.constexpr):
    """acc + a @ w for one K tile of a layer GEMM: ``a`` (BLOCK_M, BLOCK_K) float32, ``w`` the
    weight tile as the precision stores it (w_lo its tail tile and inv_col its column scales,
    where the precision has them). The relay GEMM (so2_gemm_kernel) and the fused kernel both
    call this, so the same a and the same tiles give the same acc bit for bit.

    - "ieee": FMA dots; "tf32": 16-bit inputs, whose products TF32 holds exactly.
    - The level-3 splits sum their three products a_lo w_hi + a_hi w_lo + a_hi w_hi (small ones
      first) on the tensor cores from a zero accumulator and then add them to acc with float32
      arithmetic (tensor cores truncate while they accumulate: carried across the whole K walk,
      that doubled the error against float64 on the H200, benchmarks/results/2026-12-01-h200-h,
      runs 2-3):
      - "3xtf32": w and w_lo TF32 heads and tails (float32); a is split here.
      - "3xfp16": w and w_lo float16 heads and tails of W scaled by a power of two per column,
        inv_col the inverse scales (launch.split_fp16); a is scaled per row by a power of two
        (pow2_row_scale) and split into float16 here, and the products are scaled back (column,
        then row) before they join acc. Each row's scale from its maximum over the whole K
        segment (a first pass over A, the scales applied once in the epilogue) ran 0.74-0.89x
        as fast on the H200, and accumulating the products on the tensor cores across K besides
        0.75-0.90x with 2.5-3.6x the exact path's error (benchmarks/results/2026-12-02-h200-q,
        run 2): the three waits a K tile stay. Triton (3.6 and 3.8) waits after every wgmma
        of a chain that starts from zero inside the K loop, whether the split tile is a
        register operand or, with the product computed transposed, a shared-memory one (sm_90
        compiles, benchmarks/compile_report.py's method); issuing the three and waiting once
        needs explicit wgmma control (Gluon's warpgroup_mma / warpgroup_mma_wait).
    """
    if DOT_PRECISION == "3xfp16":
        scale, inv = pow2_row_scale(a)
        a_s = a * scale[:, None]
        a_hi = a_s.to(tl.float16)
        a_lo = (a_s - a_hi.to(tl.float32)).to(tl.float16)
        part = tl.dot(a_lo, w, tl.zeros(acc.shape, dtype=tl.float32))
        part = tl.dot(a_hi, w_lo, part)
        part = tl.dot(a_hi, w, part)
        # Column scale first: part * inv_col is the tile's products with a's row scale still
        # in, at most 2**15 BLOCK_K times W's column maximum, so neither step leaves float32's
        # range unless the result does (one row-times-column factor would fall below it where
        # the row's and the column's maxima multiply to less than 2**-98).
        acc += (part * inv_col[None, :]) * inv[:, None]
    elif DOT_PRECISION == "3xtf32":
        a_hi = tf32_round(a)
        a_lo = tf32_round(a - a_hi)
        # The dot chain's first accumulator is zero but the last one is not, so Triton cannot
        # fold the add into the MMA.
        part = tl.dot(a_lo, w, tl.zeros(acc.shape, dtype=tl.float32), input_precision="tf32")
        part = tl.dot(a_hi, w_lo, part, input_precision="tf32")
        part = tl.dot(a_hi, w, part, input_precision="tf32")
        acc += part
    else:
        acc = tl.dot(a, w.to(tl.float32), acc, input_precision=DOT_PRECISION)
    return acc


@triton.jit
def head_g(grad_out, alpha, g_ptr):
    """The backward head's g = grad_out * alpha (a row's alpha for each row of the tile), in
    g_ptr's dtype. The product is rounded on its own (mul_rn: compiled, never contracted into
    a later add), so so2_bwd_head_kernel, which stores g, and so2_gemm_kernel's BWD_HEAD, which
    forms it again in its operand and residual loads, agree bitwise."""
    return to_output(mul_rn(grad_out, alpha[:, None]), g_ptr)


@triton.jit
def so2_gemm_kernel(
    a_ptr, w_ptr, wlo_ptr, wscale_ptr, res_ptr, out_ptr, z_ptr, sigma_ptr, alpha_ptr,
    F, E, ROW, K_START, K_LEN, N_START, N_LEN, CF, LG,
    w_focus_stride, w_stride_k, w_stride_n,
    MODE: tl.constexpr, APPLY_ALPHA: tl.constexpr, DOT_PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    """One column segment of a layer GEMM with its epilogue: out[:, n] for n in
    [N_START, N_START + N_LEN), acc = a[:, K_START:K_START + K_LEN] @ W[:, n - K_START].

    a_ptr, res_ptr: (F, E, ROW). W of focus f at w_ptr + f * w_focus_stride, element (k, j)
    at k * w_stride_k + j * w_stride_n; w_stride_n is 1 for every launch (launch.py passes the
    backward a contiguous copy of W^T: through W's swapped strides the tile's inner index walked
    W's slow axis, 4.5x slower on the H200). Epilogues:
    - FWD_GATED: z_ptr[n] = acc; out = res + acc * sigma[(n - CF) % LG] (sigma (F, E, LG) fp32).
    - FINAL: out (E, F, ROW) edge-major = (res + acc) * alpha[e, f] (alpha (E, F) if APPLY_ALPHA).
    - BWD: out = res + acc.
    - BWD_HEAD: BWD for the backward's first GEMM, a_ptr = res_ptr = grad_out (E, F, ROW)
      edge-major: a and res are read as g = grad_out * alpha[e, f] (APPLY_ALPHA), rounded to
      out's dtype, exactly the g the backward head would have stored (so2_bwd_head_kernel),
      which then need not be written and read back.
    Grid: F * cdiv(E, BLOCK_M) * cdiv(N_LEN, BLOCK_N) (_tile); K is walked in BLOCK_K steps, in order.
    DOT_PRECISION: how each K tile's product is taken (tile_product): "ieee", "tf32" (16-bit
    inputs) or a level-3 split (configs.py): "3xtf32" (w_ptr / wlo_ptr W's TF32 heads and tails,
    float32, same strides) or "3xfp16" (w_ptr / wlo_ptr float16 heads and tails of W scaled by a
    power of two per column, wscale_ptr (F, w_stride_k) float32 the inverse scales:
    launch.split_fp16).
    """
    focus, edge0, n0 = _tile(tl.program_id(0), E, N_LEN, BLOCK_M, BLOCK_N)
    rows = tl.arange(0, BLOCK_M)
    edges = edge0 + rows
    emask = edges < E
    n = N_START + n0 + tl.arange(0, BLOCK_N)
    nmask = n < N_START + N_LEN
    # Offsets within the tile are int32 (below BLOCK_M * ROW) from the row block's int64 base:
    # int64 offsets would take 2 registers an element, and with them triton 3.6 spills the
    # tensor-core tiles' FWD_GATED epilogue (the compile test in tests/test_so2_level3.py).
    first = focus.to(tl.int64) * E + edge0
    tile = rows[:, None] * ROW
    if MODE == BWD_HEAD:    # a and res edge-major: row (edge, focus) at (edge * F + focus) * ROW
        a_first = edge0 * F + focus
        a_tile = rows[:, None] * (F * ROW)
        if APPLY_ALPHA:
            a_alpha = tl.load(alpha_ptr + edges * F + focus, mask=emask, other=0.0).to(tl.float32)
    else:
        a_first = first
        a_tile = tile
    w_offset = focus.to(tl.int64) * w_focus_stride
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    inv_col = column_scales(wscale_ptr, focus, w_stride_k, n - K_START, nmask, DOT_PRECISION)
    for k0 in range(0, K_LEN, BLOCK_K):
        k = k0 + tl.arange(0, BLOCK_K)
        kmask = k < K_LEN
        a = tl.load((a_ptr + a_first * ROW) + (a_tile + (K_START + k)[None, :]),
                    mask=emask[:, None] & kmask[None, :], other=0.0).to(tl.float32)
        if MODE == BWD_HEAD and APPLY_ALPHA:
            a = head_g(a, a_alpha, out_ptr).to(tl.float32)
        w_offs = w_offset + k[:, None] * w_stride_k + (n - K_START)[None, :] * w_stride_n
        wmask = kmask[:, None] & nmask[None, :]
        w = tl.load(w_ptr + w_offs, mask=wmask, other=0.0)
        w_lo = w
        if DOT_PRECISION == "3xfp16" or DOT_PRECISION == "3xtf32":
            w_lo = tl.load(wlo_ptr + w_offs, mask=wmask, other=0.0)
        acc = tile_product(acc, a, w, w_lo, inv_col, DOT_PRECISION)
    mask = emask[:, None] & nmask[None, :]
    base, offs = first * ROW, tile + n[None, :]
    if MODE == FWD_GATED:
        # z first, then one operand at a time: acc, sigma and res are never all live (all three
        # at once spill the 64-outputs-a-thread tiles on triton 3.6).
        tl.store((z_ptr + base) + offs, to_output(acc, z_ptr), mask=mask)
        gate = (n - CF) % LG
        acc *= tl.load((sigma_ptr + first * LG) + (rows[:, None] * LG + gate[None, :]), mask=mask, other=0.0)
    if MODE == FINAL:
        y = tl.load((res_ptr + base) + offs, mask=mask, other=0.0).to(tl.float32) + acc
        if APPLY_ALPHA:
            alpha = tl.load(alpha_ptr + edges * F + focus, mask=emask, other=0.0).to(tl.float32)
            y = y * alpha[:, None]
        out_offs = (edges * F + focus) * ROW
        tl.store(out_ptr + out_offs[:, None] + n[None, :], to_output(y, out_ptr), mask=mask)
    else:   # BWD, BWD_HEAD, and FWD_GATED with acc gated above
        res = tl.load((res_ptr + a_first * ROW) + (a_tile + n[None, :]), mask=mask, other=0.0).to(tl.float32)
        if MODE == BWD_HEAD and APPLY_ALPHA:
            res = head_g(res, a_alpha, out_ptr).to(tl.float32)
        tl.store((out_ptr + base) + offs, to_output(res + acc, out_ptr), mask=mask)


@triton.jit
def so2_bwd_head_kernel(
    grad_out_ptr, x_local_ptr, alpha_ptr, g_ptr, grad_alpha_ptr,
    F, E, ROW,
    APPLY_ALPHA: tl.constexpr, WRITE_G: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_C: tl.constexpr,
):
    """Backward head: g (F, E, ROW) focus-major = grad_out * alpha (WRITE_G only: where the
    first GEMM reads grad_out itself, so2_gemm_kernel's BWD_HEAD, g is not stored), and
    grad_alpha[e, f] = sum_row(grad_out * x_local) / alpha (APPLY_ALPHA only).

    grad_out_ptr, x_local_ptr: (E, F, ROW) edge-major; alpha_ptr, grad_alpha_ptr: (E, F).
    Grid: F * cdiv(E, BLOCK_M); each program walks its rows in BLOCK_C column chunks.
    """
    focus, edges, emask = _rows(tl.program_id(0), E, BLOCK_M)
    src = (edges * F + focus) * ROW
    dst = focus.to(tl.int64) * E * ROW + edges * ROW
    if APPLY_ALPHA:
        alpha = tl.load(alpha_ptr + edges * F + focus, mask=emask, other=1.0).to(tl.float32)
    acc = tl.zeros((BLOCK_M, BLOCK_C), dtype=tl.float32)
    for c0 in range(0, ROW, BLOCK_C):
        c = c0 + tl.arange(0, BLOCK_C)
        mask = emask[:, None] & (c < ROW)[None, :]
        go = tl.load(grad_out_ptr + src[:, None] + c[None, :], mask=mask, other=0.0).to(tl.float32)
        if APPLY_ALPHA:
            x = tl.load(x_local_ptr + src[:, None] + c[None, :], mask=mask, other=0.0).to(tl.float32)
            acc += go * x
        if WRITE_G:
            if APPLY_ALPHA:
                g = head_g(go, alpha, g_ptr)
            else:
                g = to_output(go, g_ptr)
            tl.store(g_ptr + dst[:, None] + c[None, :], g, mask=mask)
    if APPLY_ALPHA:
        ga = tl.sum(acc, axis=1) / alpha
        tl.store(grad_alpha_ptr + edges * F + focus, to_output(ga, grad_alpha_ptr), mask=emask)


@triton.jit
def so2_bwd_sigma_kernel(
    z_ptr, gw_ptr, sigma_ptr, E, ROW, LG, CF,
    IEEE: tl.constexpr, BLOCK_M: tl.constexpr, CF_P: tl.constexpr,
):
    """Relay step 1: sigma (F, E, LG) float32 = sigmoid(s @ gw) from the saved z (F, E, ROW).
    Grid: F * cdiv(E, BLOCK_M)."""
    focus, edges, emask = _rows(tl.program_id(0), E, BLOCK_M)
    cols = tl.arange(0, CF_P)
    cmask = cols < CF
    mask = emask[:, None] & cmask[None, :]
    row = focus.to(tl.int64) * E * ROW + edges * ROW
    sig_base = focus.to(tl.int64) * E * LG + edges * LG
    if CF_P <= GATE_REGISTER_MAX:
        s = tl.load(z_ptr + row[:, None] + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        for g0 in range(0, LG, CF):
            sigma = gate_sigma_group(s, gw_ptr, focus, g0, CF, LG, CF_P, IEEE)
            tl.store(sigma_ptr + sig_base[:, None] + (g0 + cols)[None, :], sigma, mask=mask)
    else:
        for g0 in range(0, LG, CF):
            sigma = gate_sigma_chunked(z_ptr, row, emask, gw_ptr, focus, g0, cols, cmask, CF, LG, CF_P, IEEE)
            tl.store(sigma_ptr + sig_base[:, None] + (g0 + cols)[None, :], sigma, mask=mask)


@triton.jit
def _subtile_g_z(g_ptr, z_ptr, offs, mask):
    g = tl.load(g_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    z = tl.load(z_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    return g, z


@triton.jit
def group_backward(g_ptr, z_ptr, row, g0, sigma, cols, mask, M0, LG, CF):
    """One gate group's pointwise backward: (gq, gz of its m = 0 sub-tile, of its m = -1 and
    m = +1 stripe sub-tiles). The relay's pointwise kernel and the fused kernel both call this,
    so their gz and gq agree bit for bit."""
    g_a, z_a = _subtile_g_z(g_ptr, z_ptr, row + (CF + g0 + cols)[None, :], mask)
    g_b, z_b = _subtile_g_z(g_ptr, z_ptr, row + (M0 + g0 + cols)[None, :], mask)
    g_c, z_c = _subtile_g_z(g_ptr, z_ptr, row + (M0 + LG + g0 + cols)[None, :], mask)
    gsigma = g_a * z_a + g_b * z_b
    gsigma += g_c * z_c
    gq = gsigma * sigma * (1.0 - sigma)
    return gq, g_a * sigma, g_b * sigma, g_c * sigma


@triton.jit
def _gw_t_block(gw_base, g0, cols, cmask, LG):
    """gw^T for one group: element (j, c) = gw[c, g0 + j], float32 (CF_P, CF_P)."""
    return _gw_t_rows(gw_base, g0, cols, cmask, cols, cmask, LG)


@triton.jit
def _gw_t_rows(gw_base, g0, j, jmask, cols, cmask, LG):
    """Rows ``j`` of one group's gw^T: element (i, c) = gw[c, g0 + j[i]], float32."""
    return tl.load(gw_base + cols[None, :] * LG + (g0 + j)[:, None],
                   mask=jmask[:, None] & cmask[None, :], other=0.0).to(tl.float32)


@triton.jit
def scalar_backward(g_ptr, z_ptr, row, cols, mask, acc):
    """gz_s = g_s * s0 * (1 + s (1 - s0)) + acc, with acc = sum over groups of gq @ gw^T."""
    g_s, s = _subtile_g_z(g_ptr, z_ptr, row + cols[None, :], mask)
    s0 = sigmoid_f32(s)
    return g_s * s0 * (1.0 + s * (1.0 - s0)) + acc


@triton.jit
def _pointwise_columns(g_ptr, z_ptr, sigma_ptr, gz_ptr, gq_ptr, gw_base, row, sig_row, g0, j, jmask, mask, cols,
                       cmask, acc, M0, LG, CF, WRITE_GQ: tl.constexpr, IEEE: tl.constexpr):
    """The pointwise kernel's work on columns ``j`` of gate group g0 (``mask``: the row block's
    edges by those columns): gz of the group's three sub-tiles and, with WRITE_GQ, gq stored;
    returns acc + gq @ (rows j of the group's gw^T)."""
    sigma = tl.load(sigma_ptr + sig_row + (g0 + j)[None, :], mask=mask, other=0.0)
    gq, gz_a, gz_b, gz_c = group_backward(g_ptr, z_ptr, row, g0, sigma, j, mask, M0, LG, CF)
    tl.store(gz_ptr + row + (CF + g0 + j)[None, :], to_output(gz_a, gz_ptr), mask=mask)
    tl.store(gz_ptr + row + (M0 + g0 + j)[None, :], to_output(gz_b, gz_ptr), mask=mask)
    tl.store(gz_ptr + row + (M0 + LG + g0 + j)[None, :], to_output(gz_c, gz_ptr), mask=mask)
    if WRITE_GQ:
        tl.store(gq_ptr + sig_row + (g0 + j)[None, :], gq, mask=mask)
    return dot_f32acc(gq, _gw_t_rows(gw_base, g0, j, jmask, cols, cmask, LG), acc, IEEE)


@triton.jit
def so2_bwd_pointwise_kernel(
    g_ptr, z_ptr, sigma_ptr, gw_ptr, gz_ptr, gq_ptr,
    E, ROW, M0, LG, CF,
    WRITE_GQ: tl.constexpr, IEEE: tl.constexpr, BLOCK_M: tl.constexpr, CF_P: tl.constexpr,
):
    """Relay step 2: gz (F, E, ROW) and, with WRITE_GQ, gq (F, E, LG) float32.

    Per gate group (its m = 0 sub-tile and its two stripe sub-tiles):
    gz = g * sigma, gsigma = sum of g * z over the three, gq = gsigma * sigma * (1 - sigma);
    then gz_s = g_s * s0 * (1 + s (1 - s0)) + sum over groups of gq @ gw^T (group order).
    g_ptr, z_ptr: (F, E, ROW); sigma_ptr: (F, E, LG) fp32; gw_ptr: (F, CF, LG).
    Grid: F * cdiv(E, BLOCK_M).
    """
    focus, edges, emask = _rows(tl.program_id(0), E, BLOCK_M)
    cols = tl.arange(0, CF_P)
    cmask = cols < CF
    mask = emask[:, None] & cmask[None, :]
    row = (focus.to(tl.int64) * E * ROW + edges * ROW)[:, None]
    sig_row = (focus.to(tl.int64) * E * LG + edges * LG)[:, None]
    gw_base = gw_ptr + focus.to(tl.int64) * CF * LG
    acc = tl.zeros((BLOCK_M, CF_P), dtype=tl.float32)
    if CF_P <= GATE_REGISTER_MAX:
        for g0 in range(0, LG, CF):
            acc = _pointwise_columns(g_ptr, z_ptr, sigma_ptr, gz_ptr, gq_ptr, gw_base, row, sig_row, g0, cols,
                                     cmask, mask, cols, cmask, acc, M0, LG, CF, WRITE_GQ, IEEE)
    else:
        # GATE_CHUNK of a group's columns at a time (GATE_REGISTER_MAX): the element-wise work
        # per chunk, and gq @ gw^T accumulated chunk after chunk in K order.
        for g0 in range(0, LG, CF):
            for j0 in range(0, CF, GATE_CHUNK):
                j = j0 + tl.arange(0, GATE_CHUNK)
                jmask = j < CF
                acc = _pointwise_columns(g_ptr, z_ptr, sigma_ptr, gz_ptr, gq_ptr, gw_base, row, sig_row, g0, j,
                                         jmask, emask[:, None] & jmask[None, :], cols, cmask, acc, M0, LG, CF,
                                         WRITE_GQ, IEEE)
    gz_s = scalar_backward(g_ptr, z_ptr, row, cols, mask, acc)
    tl.store(gz_ptr + row + cols[None, :], to_output(gz_s, gz_ptr), mask=mask)


@triton.jit
def so2_bwd_fused_kernel(
    g_ptr, z_ptr, gw_ptr, sigma_ptr, w_ptr, wlo_ptr, wscale_ptr, out_ptr,
    E, ROW, M0, LG, K_START, K_LEN, N_START, N_LEN,
    w_focus_stride, w_stride_k, w_stride_n,
    SEGMENT_M0: tl.constexpr, SIGMA_LOADED: tl.constexpr, DOT_PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CF_P: tl.constexpr,
):
    """Fused per-layer backward (fp32, Cf = CF_P a power of two == BLOCK_K; launch.fused_layer's
    guard, so a sub-tile is exactly CF_P columns):
    out[:, n] = g[:, n] + sum_k gz[:, K_START + k] W^T[k, n - K_START], with gz formed in
    registers one K tile (one sub-tile) at a time, never stored.

    sigma: with SIGMA_LOADED read from sigma_ptr (F, E, LG) float32, the relay's sigma kernel's
    output (so2_bwd_sigma_kernel, run once per layer before this kernel); else recomputed by
    every program from the saved z (gate_sigma_group), and sigma_ptr is not read.

    Bitwise equal to relay = sigma kernel + pointwise kernel + so2_gemm_kernel(BWD) with
    BLOCK_K = Cf and the same tiles, warps and DOT_PRECISION: sigma is the sigma kernel's
    (loaded, or recomputed by the same helper), the gz values come from the same helpers in
    the same operation order, and the K tiles are accumulated in the same order by the same
    tile_product. DOT_PRECISION: "ieee", or "3xfp16" with the split weights of so2_gemm_kernel
    (w_ptr / wlo_ptr float16 heads and tails, wscale_ptr the inverse column scales).
    SEGMENT_M0: output and K columns [0, M0) (K tile 0 is gz_s, which needs every group's gq:
    the heavy pass); else [M0, ROW) (gz = g * sigma only).
    g_ptr, z_ptr, out_ptr: (F, E, ROW); gw_ptr: (F, Cf, LG); W as in so2_gemm_kernel (a contiguous
    W^T). Grid: F * cdiv(E, BLOCK_M) * cdiv(N_LEN, BLOCK_N) (_tile).
    """
    focus, edge0, n0 = _tile(tl.program_id(0), E, N_LEN, BLOCK_M, BLOCK_N)
    rows = tl.arange(0, BLOCK_M)
    emask = edge0 + rows < E
    n = N_START + n0 + tl.arange(0, BLOCK_N)
    nmask = n < N_START + N_LEN
    # Sub-tiles walked in constexpr CF_P steps: the compiler sees the loads' alignment and
    # vectorizes them.
    cols = tl.arange(0, CF_P)
    cmask = cols < CF_P
    mask = emask[:, None] & cmask[None, :]
    # The row block's surfaces from int64 bases, int32 offsets within the tile (below
    # BLOCK_M * ROW), as so2_gemm_kernel: int64 offset tensors take two registers an element.
    first = focus.to(tl.int64) * E + edge0
    g_base, z_base = g_ptr + first * ROW, z_ptr + first * ROW
    row = rows[:, None] * ROW
    sig_base, sig_row = sigma_ptr + first * LG, rows[:, None] * LG
    gw_base = gw_ptr + focus.to(tl.int64) * CF_P * LG
    w_base = w_ptr + focus.to(tl.int64) * w_focus_stride
    wlo_base = wlo_ptr + focus.to(tl.int64) * w_focus_stride
    inv_col = column_scales(wscale_ptr, focus, w_stride_k, n - K_START, nmask, DOT_PRECISION)
    s = tl.zeros((BLOCK_M, CF_P), dtype=tl.float32)    # the scalars, where sigma is recomputed
    if not SIGMA_LOADED:
        s = tl.load(z_base + row + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    if SEGMENT_M0:
        acc_s = tl.zeros((BLOCK_M, CF_P), dtype=tl.float32)
        for g0 in range(0, LG, CF_P):
            sigma = _group_sigma(s, gw_ptr, sig_base, sig_row, focus, g0, cols, mask, LG, CF_P, SIGMA_LOADED)
            gq, gz_a, gz_b, gz_c = group_backward(g_base, z_base, row, g0, sigma, cols, mask, M0, LG, CF_P)
            acc_s = tl.dot(gq, _gw_t_block(gw_base, g0, cols, cmask, LG), acc_s, input_precision="ieee")
        gz_s = scalar_backward(g_base, z_base, row, cols, mask, acc_s)
        w, w_lo = _w_tiles(w_base, wlo_base, 0, cols, n, nmask, K_START, K_LEN, w_stride_k, w_stride_n,
                           DOT_PRECISION)
        acc = tile_product(acc, gz_s, w, w_lo, inv_col, DOT_PRECISION)
        for g0 in range(0, LG, CF_P):
            sigma = _group_sigma(s, gw_ptr, sig_base, sig_row, focus, g0, cols, mask, LG, CF_P, SIGMA_LOADED)
            g = tl.load(g_base + row + (CF_P + g0 + cols)[None, :], mask=mask, other=0.0).to(tl.float32)
            w, w_lo = _w_tiles(w_base, wlo_base, CF_P + g0, cols, n, nmask, K_START, K_LEN, w_stride_k, w_stride_n,
                               DOT_PRECISION)
            acc = tile_product(acc, g * sigma, w, w_lo, inv_col, DOT_PRECISION)
    else:
        for k0 in range(0, K_LEN, CF_P):
            sigma = _group_sigma(s, gw_ptr, sig_base, sig_row, focus, k0 % LG, cols, mask, LG, CF_P,
                                 SIGMA_LOADED)
            g = tl.load(g_base + row + (K_START + k0 + cols)[None, :], mask=mask, other=0.0).to(tl.float32)
            w, w_lo = _w_tiles(w_base, wlo_base, k0, cols, n, nmask, K_START, K_LEN, w_stride_k, w_stride_n,
                               DOT_PRECISION)
            acc = tile_product(acc, g * sigma, w, w_lo, inv_col, DOT_PRECISION)
    omask = emask[:, None] & nmask[None, :]
    offs = row + n[None, :]
    res = tl.load(g_base + offs, mask=omask, other=0.0).to(tl.float32)
    tl.store((out_ptr + first * ROW) + offs, to_output(res + acc, out_ptr), mask=omask)


@triton.jit
def _group_sigma(s, gw_ptr, sig_base, sig_row, focus, g0, cols, mask, LG, CF_P: tl.constexpr,
                 SIGMA_LOADED: tl.constexpr):
    """One gate group's sigma tile for the fused kernel: the sigma kernel's (loaded from the
    row block's sigma rows at sig_base + sig_row) or recomputed from s by gate_sigma_group,
    the sigma kernel's own helper (so both are the same values)."""
    if SIGMA_LOADED:
        return tl.load(sig_base + sig_row + (g0 + cols)[None, :], mask=mask, other=0.0)
    else:
        return gate_sigma_group(s, gw_ptr, focus, g0, CF_P, LG, CF_P, True)


@triton.jit
def _w_tiles(w_base, wlo_base, k0, cols, n, nmask, K_START, K_LEN, w_stride_k, w_stride_n,
             DOT_PRECISION: tl.constexpr):
    """The weight's head and tail tiles (the tail is the head where the precision has none) for
    rows k0 .. k0 + CF_P (segment-relative) and columns n of one focus's weights at w_base /
    wlo_base, as so2_gemm_kernel loads them."""
    k = k0 + cols
    offs = k[:, None] * w_stride_k + (n - K_START)[None, :] * w_stride_n
    wmask = (k < K_LEN)[:, None] & nmask[None, :]
    w = tl.load(w_base + offs, mask=wmask, other=0.0)
    if DOT_PRECISION == "3xfp16" or DOT_PRECISION == "3xtf32":
        w_lo = tl.load(wlo_base + offs, mask=wmask, other=0.0)
    else:
        w_lo = w
    return w, w_lo
