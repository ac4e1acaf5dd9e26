"""Triton kernels for grouped_glu_mlp's fused path: one grouped-GEMM template with epilogues, a
ragged-K weight-gradient GEMM and a ragged column sum (the compose route's glue passes are in
compose_kernels.py; they share the GLU helpers here). Only ``@triton.jit`` code; launch.py
launches.

Rows are tokens permuted by expert: expert e owns rows [o_e, o_e + m_e) with
m_e = tokens_per_expert[e] read *on the device*; o_e is its prefix sum. A row tile is BLOCK_M
rows of one expert; the row tiles of all experts are numbered consecutively (expert 0's first)
and there are at most cdiv(T, BLOCK_M) + E of them, a bound known on the host without reading
the counts. Programs are persistent: program p handles tiles p, p + P, ... of the
(row tile x column tile) space and skips tile numbers beyond the last expert's tiles.
Rows at or beyond T are masked, so counts that sum past T cannot reach past the last row; a
negative count would start the next expert's rows below 0, which the masks do not catch: what
keeps every split in bounds is launch.check_counts's device assert (m_e >= 0 and sum(m_e) ==
T), which runs before any kernel that reads the counts.

GLU column order (docs/specs/grouped_glu_mlp.md): activation column j reads FC1 output columns
gate g(j) = 2s floor(j/s) + j mod s and up u(j) = g(j) + s for interleave s; halves (gate j,
up F + j) when INTERLEAVE == 0.

Quantized recipes (RECIPE constexpr; recipes.py says which tensors are quantized and how):
- RECIPE_FP8_BLOCK: operands are float8_e4m3fn bits (uint8) with float32 scales per 128-wide
  K chunk (A: one per row and chunk; B: one per 128x128 weight block, so one per column and
  chunk). BLOCK_K must be 128: each chunk is one FP8 tensor-core dot into a fresh float32
  accumulator, promoted as ``acc += dot(a8, b8) * (sa * sb)`` (DeepGEMM's scheme; Hopper's FP8
  MMA accumulates with fewer than 32 bits, so chunk sums never run longer than 128 terms).
- RECIPE_MXFP8 / RECIPE_NVFP4 (emulated): the loaders decode E4M3 data x E8M0 scale, or packed
  E2M1 x E4M3 scale, into bfloat16 (every such product is exact in bfloat16, barring mxfp8
  values below bfloat16's subnormal range, 2^-133), and the dot runs in bfloat16 with float32
  accumulation. NVFP4's per-tensor / per-expert scales multiply the accumulator in the
  epilogue (gscale_ptr). Scales are read from the flat 128x4-swizzled buffers.
"""

import triton
import triton.language as tl

from ...quant.kernels import block_amax, e4m3_value, fp8_block_scales, fp8_codes, nan_where, swizzled_offset
from ..triton_common import dot_f32acc, sigmoid_f32, to_output

EPI_STORE = tl.constexpr(0)   # C = A @ B (+ probs * bias)
EPI_GLU = tl.constexpr(1)     # z = A @ B (gate and up), h = p * act(z)
EPI_DGLU = tl.constexpr(2)    # dh = A @ B; dz from z, p; per-tile dprob partials

SWIGLU = tl.constexpr(0)
GEGLU = tl.constexpr(1)
GEGLU_LIMIT = tl.constexpr(7.0)

RECIPE_NONE = tl.constexpr(0)
RECIPE_FP8_BLOCK = tl.constexpr(1)
RECIPE_MXFP8 = tl.constexpr(2)
RECIPE_NVFP4 = tl.constexpr(3)
MXFP8_BLOCK = tl.constexpr(32)
EXPERT_CHUNK = tl.constexpr(128)   # experts per vector step of _expert_blocks
NVFP4_BLOCK = tl.constexpr(16)


@triton.jit
def glu_cols(j, F, INTERLEAVE: tl.constexpr):
    """FC1 output columns (gate, up) of activation columns j."""
    if INTERLEAVE == 0:
        gate = j
        up = j + F
    else:
        gate = (j // INTERLEAVE) * (2 * INTERLEAVE) + j % INTERLEAVE
        up = gate + INTERLEAVE
    return gate, up


@triton.jit
def geglu_clamp(zg, zu):
    """GEGLU's clamps, as torch.clamp (the reference's): zg at most GEGLU_LIMIT, zu within
    +-GEGLU_LIMIT, a NaN kept. Selects, not tl.minimum / tl.maximum, whose default (min.f32,
    fmin in the interpreter) returns the other operand for a NaN: it would give a NaN gate
    as 7, and a diverged token finite outputs, dprobs and dW2 rows."""
    g = tl.where(zg > GEGLU_LIMIT, GEGLU_LIMIT, zg)
    u = tl.where(zu > GEGLU_LIMIT, GEGLU_LIMIT, tl.where(zu < -GEGLU_LIMIT, -GEGLU_LIMIT, zu))
    return g, u


@triton.jit
def glu_act(zg, zu, ACT: tl.constexpr):
    """a = silu(zg) * zu (SWIGLU) or the clamped quick-gelu GEGLU of the spec, float32."""
    if ACT == SWIGLU:
        return zg * sigmoid_f32(zg) * zu
    else:
        g, u = geglu_clamp(zg, zu)
        return (u + 1.0) * (g * sigmoid_f32(1.702 * g))


@triton.jit
def glu_act_grad(zg, zu, da, ACT: tl.constexpr):
    """(dzg, dzu) given da = dL/da, float32. At the clamp bounds the gradient passes, as
    torch.clamp's backward (and the reference) has it."""
    if ACT == SWIGLU:
        sg = sigmoid_f32(zg)
        dzu = da * zg * sg
        dzg = da * zu * sg * (1.0 + zg * (1.0 - sg))
    else:
        g, u = geglu_clamp(zg, zu)
        sg = sigmoid_f32(1.702 * g)
        dzu = tl.where((zu >= -GEGLU_LIMIT) & (zu <= GEGLU_LIMIT), da * g * sg, 0.0)
        dg = da * (u + 1.0) * sg * (1.0 + 1.702 * g * (1.0 - sg))
        dzg = tl.where(zg <= GEGLU_LIMIT, dg, 0.0)
    return dzg, dzu


@triton.jit
def advance_expert(row_tile, counts_ptr, E, expert, tiles_before, rows_before, m, BLOCK_M: tl.constexpr):
    """The tile cursor of a persistent program, moved forward to row tile ``row_tile``.

    The cursor is (expert, tiles_before, rows_before, m): an expert, the row tiles and the
    rows of the experts before it, and its row count m (read from the device-side counts).
    A program visits its row tiles in increasing order, so the cursor only moves forward:
    over the whole launch a program reads each count once, not E counts per tile (a scan per
    tile cost as much as the K loop at 128 experts). expert == E past the last tile."""
    while (expert < E) & (row_tile >= tiles_before + tl.cdiv(m, BLOCK_M)):
        tiles_before += tl.cdiv(m, BLOCK_M)
        rows_before += m
        expert += 1
        m = tl.load(counts_ptr + tl.minimum(expert, E - 1)).to(tl.int32)
    return expert, tiles_before, rows_before, m


# ---------------------------------------------------------------------------------------------
# Operands through TMA (tensor descriptors: 16-bit operands without a recipe, fp8_block's float8
# data; launch.py builds the host-side descriptors and says when they are used). The copy engine
# zero-fills what lies outside a descriptor's shape, so tiles need no masks: rows of the next
# expert that a row tile reads are computed and then masked at the store, like the pointer
# path's.

TMA_B_ROWS = tl.constexpr(0)   # B_e(k, n) = W[e, n, k]: the weight as (E * rows, K), tile [BLOCK_N, BLOCK_K]
TMA_B_COLS = tl.constexpr(1)   # B_e(k, n) = W[e, k, n]: the weight as (E * K, N), tile [BLOCK_K, BLOCK_N]
TMA_B_RUNS = tl.constexpr(2)   # the GLU's gate or up runs of an interleave dividing BLOCK_N: W1 as
                               # (E * F / s, 2, s, K), tile [BLOCK_N / s, 1, s, BLOCK_K]


@triton.jit
def tma_b_tile(b_desc, expert, col0, k0, b_rows, K, half, F, INTERLEAVE: tl.constexpr, B_MODE: tl.constexpr,
               BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """The (BLOCK_K, BLOCK_N) tile of B_e at K offset k0 whose first column is col0: a weight
    row index (TMA_B_ROWS: of expert e's b_rows rows; the GLU's gate0 / up0), an output column
    (TMA_B_COLS), or an activation column whose gate (half 0) or up (half 1) runs are read
    (TMA_B_RUNS)."""
    if B_MODE == TMA_B_ROWS:
        b = b_desc.load([expert * b_rows + col0, k0]).T
    elif B_MODE == TMA_B_COLS:
        b = b_desc.load([expert * K + k0, col0])
    else:
        runs = tl.reshape(b_desc.load([(expert * F + col0) // INTERLEAVE, half, 0, k0]), (BLOCK_N, BLOCK_K))
        b = runs.T
    return b


# ---------------------------------------------------------------------------------------------
# Quantized operands


@triton.jit
def e8m0_value(e):
    """Biased E8M0 exponent (uint32) -> float32 2^(e - 127) (2^-127 subnormal); 0xFF -> NaN."""
    bits = tl.where(e >= 1, e << 23, 0x00400000)
    bits = tl.where(e == 0xFF, 0x7FC00000, bits)
    return bits.to(tl.float32, bitcast=True)


@triton.jit
def e2m1_value(code):
    """E2M1 code (uint32 0..15, bit 3 the sign) -> float32: 0, .5, 1, 1.5, 2, 3, 4, 6."""
    mag = code & 7
    normal = ((((mag >> 1) + 126) << 23) | ((mag & 1) << 22)).to(tl.float32, bitcast=True)
    val = tl.where(mag < 2, mag.to(tl.float32) * 0.5, normal)
    return tl.where((code & 8) != 0, -val, val)


@triton.jit
def load_fp8(data_ptr, offs, mask):
    """float8_e4m3fn tile from uint8 bits (masked elements 0), as tl.dot takes it."""
    ptr = data_ptr.to(tl.pointer_type(tl.float8e4nv), bitcast=True)
    return tl.load(ptr + offs, mask=mask, other=0.0)


@triton.jit
def load_decoded(data_ptr, scale_ptr, row_offs, k, scale_rows, mask, scale_cols, RECIPE: tl.constexpr):
    """bfloat16 values of an mxfp8 / nvfp4 tile of a K-contiguous operand (rows, K).

    Every argument is already broadcast to the tile's shape (rows x k, or k x rows):
    row_offs is the data offset of the element's row (bytes; nvfp4 rows hold K / 2 bytes,
    element 2i in the low nibble), k its K index, scale_rows its row in the scale matrix,
    whose (rows, K / block) entries sit at swizzled offsets with scale_cols padded columns.
    Masked elements decode to 0 (data and scale bytes read as 0)."""
    if RECIPE == RECIPE_NVFP4:
        bits = tl.load(data_ptr + row_offs + k // 2, mask=mask, other=0).to(tl.uint32)
        code = (bits >> ((k % 2) * 4).to(tl.uint32)) & 0xF
        scale = tl.load(scale_ptr + swizzled_offset(scale_rows, k // NVFP4_BLOCK, scale_cols), mask=mask,
                        other=0).to(tl.uint32)
        val = e2m1_value(code) * e4m3_value(scale)
    else:
        bits = tl.load(data_ptr + row_offs + k, mask=mask, other=0).to(tl.uint32)
        scale = tl.load(scale_ptr + swizzled_offset(scale_rows, k // MXFP8_BLOCK, scale_cols), mask=mask,
                        other=0).to(tl.uint32)
        val = e4m3_value(bits) * e8m0_value(scale)
    return val.to(tl.bfloat16)


@triton.jit
def load_a_tile(a_ptr, a_scale_ptr, rows64, k, rmask, kmask, lda, a_scale_ld, RECIPE: tl.constexpr):
    """A (T, K) for rows x k, as the dot takes it: x.dtype values (RECIPE_NONE), float8
    (fp8_block: its scales come from fp8_row_scales), or decoded bfloat16 (mxfp8 / nvfp4)."""
    mask = rmask[:, None] & kmask[None, :]
    if RECIPE == RECIPE_NONE:
        a = tl.load(a_ptr + rows64[:, None] * lda + k[None, :], mask=mask, other=0.0)
    elif RECIPE == RECIPE_FP8_BLOCK:
        a = load_fp8(a_ptr, rows64[:, None] * lda + k[None, :], mask)
    else:
        a = load_decoded(a_ptr, a_scale_ptr, rows64[:, None] * lda, k[None, :], rows64[:, None], mask, a_scale_ld,
                         RECIPE)
    return a


@triton.jit
def fp8_row_scales(scale_ptr, rows64, k0, scale_ld, rmask):
    """fp8_block: the float32 scales of ``rows`` for the K chunk at k0, from scales stored
    (K/128, rows) with row stride scale_ld: one contiguous vector per chunk."""
    return tl.load(scale_ptr + (k0 // 128) * scale_ld + rows64, mask=rmask, other=0.0)


@triton.jit
def fp8_b_scale(scale_row, n_stride, first_col, n, nmask, UNIFORM: tl.constexpr, BLOCK_N: tl.constexpr):
    """fp8_block: the 128x128 block scale of each B column n for one K chunk (scale_row: that
    chunk's row of the expert's block scales; column block c at c * n_stride).

    UNIFORM: all of the tile's columns are in the block of first_col (true for BLOCK_N <= 128,
    tiles being BLOCK_N-aligned, and for the GLU's gate and up columns where launch.py's
    glu_scale_uniform says so): one scalar load. A gather per column holds its pointers in
    registers, which spills the fp8 GLU kernel."""
    if UNIFORM:
        scale = tl.full((BLOCK_N,), 1.0, tl.float32) * tl.load(scale_row + (first_col // 128) * n_stride)
    else:
        scale = tl.load(scale_row + (n // 128) * n_stride, mask=nmask, other=0.0)
    return scale   # a single return: Triton does not inline a helper that returns inside a branch


@triton.jit
def fp8_chunk_scales(a_scale_ptr, rows64, rmask, a_scale_ld, b_scale_base, b_scale_k_stride, b_scale_n_stride, k0,
                     gate0, gate_n, up0, up_n, nmask, up_mask, UNIFORM: tl.constexpr, TWO_DOTS: tl.constexpr,
                     BLOCK_N: tl.constexpr):
    """fp8_block: (A row scales, B scales of the first dot's columns, of the second's) for the
    K chunk at k0 (the second are the first unless TWO_DOTS)."""
    a_scale = fp8_row_scales(a_scale_ptr, rows64, k0, a_scale_ld, rmask)
    scale_row = b_scale_base + (k0 // 128) * b_scale_k_stride
    gate_scale = fp8_b_scale(scale_row, b_scale_n_stride, gate0, gate_n, nmask, UNIFORM, BLOCK_N)
    up_scale = gate_scale
    if TWO_DOTS:
        up_scale = fp8_b_scale(scale_row, b_scale_n_stride, up0, up_n, up_mask, UNIFORM, BLOCK_N)
    return a_scale, gate_scale, up_scale


@triton.jit
def mma_b_tile(acc, a, a_scale, b_scale, b_base, b_scale_ptr, b_scale_row0, k, n, kmask, nmask,
               b_k_stride, b_n_stride, b_scale_cols, IEEE: tl.constexpr, RECIPE: tl.constexpr):
    """acc + a @ B[k, n] (one K step), B of one expert at b_base.

    RECIPE_NONE: element (k, n) at b_base + k*b_k_stride + n*b_n_stride.
    fp8_block: the same for the float8 bits (K-contiguous); adds dot(a8, b8) * (a_scale *
    b_scale) for this 128-wide chunk (the row scales of A and the column scales of B).
    mxfp8 / nvfp4: B is stored K-contiguous (b_k_stride 1; n * b_n_stride is the byte offset
    of weight row n), its scales at swizzled rows b_scale_row0 + n of b_scale_cols columns."""
    mask = kmask[:, None] & nmask[None, :]
    if RECIPE == RECIPE_NONE:
        b = tl.load(b_base + k[:, None] * b_k_stride + n[None, :] * b_n_stride, mask=mask, other=0.0)
        acc = dot_f32acc(a, b, acc, IEEE)
    elif RECIPE == RECIPE_FP8_BLOCK:
        b = load_fp8(b_base, k[:, None] * b_k_stride + n[None, :] * b_n_stride, mask)
        acc = fp8_scaled_dot(acc, a, b, a_scale, b_scale)
    else:
        n64 = n.to(tl.int64)
        b = load_decoded(b_base, b_scale_ptr, n64[None, :] * b_n_stride, k[:, None], b_scale_row0 + n64[None, :],
                         mask, b_scale_cols, RECIPE)
        acc = dot_f32acc(a, b, acc, False)
    return acc


Z_POINTERS = tl.constexpr(0)     # the dGLU reads z's gate and up columns through pointers
Z_CONTIGUOUS = tl.constexpr(1)   # through a descriptor of z (T, 2F), tile [BLOCK_M, BLOCK_N]: contiguous columns
Z_RUNS = tl.constexpr(2)         # through a descriptor of z as (T, F / s, 2, s), tile [BLOCK_M, BLOCK_N / s, 1, s]


@triton.jit
def load_z_pair(z_ptr, z_desc, n, col0, mask, rows64, row_start, ldz, F, INTERLEAVE: tl.constexpr,
                Z_MODE: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """(zg, zu) float32: z at the gate and up columns of activation columns n = col0 + arange.
    Through a descriptor (launch.py: where the dGLU reads its operands through TMA) the
    elements the mask excludes hold other rows' or columns' values, not 0: the caller keeps
    them out of sums and stores. A descriptor holds no per-element addresses, which pointer
    gathers keep in registers (the TMA dGLU spilled at 255 registers with them, triton 3.6)."""
    if Z_MODE == Z_POINTERS:
        gate_j, up_j = glu_cols(n, F, INTERLEAVE)
        zg = tl.load(z_ptr + rows64[:, None] * ldz + gate_j[None, :], mask=mask, other=0.0)
        zu = tl.load(z_ptr + rows64[:, None] * ldz + up_j[None, :], mask=mask, other=0.0)
    elif Z_MODE == Z_RUNS:
        zg = tl.reshape(z_desc.load([row_start, col0 // INTERLEAVE, 0, 0]), (BLOCK_M, BLOCK_N))
        zu = tl.reshape(z_desc.load([row_start, col0 // INTERLEAVE, 1, 0]), (BLOCK_M, BLOCK_N))
    else:
        gate0, up0 = glu_cols(col0, F, INTERLEAVE)
        zg = z_desc.load([row_start, gate0])
        zu = z_desc.load([row_start, up0])
    return zg.to(tl.float32), zu.to(tl.float32)


@triton.jit
def fp8_scaled_dot(acc, a, b, a_scale, b_scale):
    """fp8_block: acc + dot(a8, b8) * (a_scale * b_scale) for one 128-wide K chunk (the row
    scales of a, the column scales of b)."""
    return acc + tl.dot(a, b) * (a_scale[:, None] * b_scale[None, :])


@triton.jit
def tma_dot(acc, a, b, a_scale, b_scale, IEEE: tl.constexpr, RECIPE: tl.constexpr):
    """acc + a @ b of tiles read through descriptors: 16-bit operands (RECIPE_NONE), or
    float8 with fp8_block's chunk scales (fp8_scaled_dot)."""
    if RECIPE == RECIPE_FP8_BLOCK:
        acc = fp8_scaled_dot(acc, a, b, a_scale, b_scale)
    else:
        acc = dot_f32acc(a, b, acc, IEEE)
    return acc


@triton.jit
def dglu_store(dh, zg, zu, n, mask, rows64, rmask, probs_ptr, dz_ptr, part_ptr, ldz_out, F, n_part_cols,
               part_col, INTERLEAVE: tl.constexpr, ACT: tl.constexpr):
    """The dGLU epilogue of dh's activation columns n (float32 tile): dz at their gate and up
    columns from the saved z (zg, zu: load_z_pair) and p, and the dprob partial sum_n dh *
    act(z) of each row into column part_col of part (masked elements contribute 0)."""
    gate_j, up_j = glu_cols(n, F, INTERLEAVE)
    p = tl.load(probs_ptr + rows64, mask=rmask, other=0.0).to(tl.float32)
    partial = tl.sum(tl.where(mask, dh * glu_act(zg, zu, ACT), 0.0), axis=1)
    tl.store(part_ptr + rows64 * n_part_cols + part_col, partial, mask=rmask)
    dzg, dzu = glu_act_grad(zg, zu, dh * p[:, None], ACT)
    tl.store(dz_ptr + rows64[:, None] * ldz_out + gate_j[None, :], to_output(dzg, dz_ptr), mask=mask)
    tl.store(dz_ptr + rows64[:, None] * ldz_out + up_j[None, :], to_output(dzu, dz_ptr), mask=mask)


@triton.jit
def dglu_quantize_dz(dz_ptr, q_ptr, q_scale_ptr, n, n0, mask, rows64, rmask, T, ldz_out, F,
                     INTERLEAVE: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """dz's fp8_block row-wise copy for the 64 activation columns n = n0 + arange(64)
    (INTERLEAVE dividing 64): their gate and up columns are exactly dz's columns
    [2 n0, 2 n0 + 128), one 1x128 block. Reads back the dz this program stored (L2 / L1), so
    the codes come from the rounded values, and writes E4M3 bits at q_ptr (T, 2F) and the
    block scales at q_scale_ptr (2F / 128, T): bitwise what the quantizer kernel writes from
    dz (quant.kernels.fp8_encode). Reading back, rather than quantizing the tiles still in
    registers, keeps the epilogue from spilling (sm_90, triton 3.8: 352 bytes at 128x64 on 8
    warps when dz's tiles stay live)."""
    gate_j, up_j = glu_cols(n, F, INTERLEAVE)
    dzg = tl.load(dz_ptr + rows64[:, None] * ldz_out + gate_j[None, :], mask=mask, other=0.0).to(tl.float32)
    dzu = tl.load(dz_ptr + rows64[:, None] * ldz_out + up_j[None, :], mask=mask, other=0.0).to(tl.float32)
    # The block's amax over both column sets (block_amax: NaN for a NaN or +-inf element).
    amax_g = tl.reshape(block_amax(dzg, BLOCK_M, BLOCK_N, 1, BLOCK_N), (BLOCK_M,))
    amax_u = tl.reshape(block_amax(dzu, BLOCK_M, BLOCK_N, 1, BLOCK_N), (BLOCK_M,))
    amax = nan_where((amax_g != amax_g) | (amax_u != amax_u), tl.maximum(amax_g, amax_u))
    enc, scale = fp8_block_scales(amax, False)
    tl.store(q_ptr + rows64[:, None] * ldz_out + gate_j[None, :], fp8_codes(dzg, enc[:, None]), mask=mask)
    tl.store(q_ptr + rows64[:, None] * ldz_out + up_j[None, :], fp8_codes(dzu, enc[:, None]), mask=mask)
    tl.store(q_scale_ptr + (n0 // 64).to(tl.int64) * T + rows64, scale, mask=rmask & (n0 < F))


@triton.jit
def grouped_gemm_kernel(
    a_ptr, b_ptr, c_ptr, counts_ptr, probs_ptr, bias_ptr, z_ptr, part_ptr, q_ptr, q_scale_ptr,
    a_scale_ptr, b_scale_ptr, gscale_ptr, a_desc, b_desc, z_desc,
    T, K, N, E, F, n_row_tiles_bound,
    lda, b_e_stride, b_k_stride, b_n_stride, ldc, ldz, bias_e_stride, n_part_cols,
    a_scale_ld, b_scale_e_stride, b_scale_k_stride, b_scale_n_stride, b_scale_rows, b_scale_cols, b_rows,
    EPILOGUE: tl.constexpr, ACT: tl.constexpr, INTERLEAVE: tl.constexpr, HAS_BIAS: tl.constexpr,
    IEEE: tl.constexpr, RECIPE: tl.constexpr, GLU_UNIFORM_SCALE: tl.constexpr, QUANT_DZ: tl.constexpr,
    TMA: tl.constexpr, B_MODE: tl.constexpr, Z_MODE: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    """Grouped GEMM C[rows of e] = A[rows of e] @ B_e with an epilogue, persistent.

    a_ptr: (T, K) row stride lda. B_e element (k, n) at b_ptr + e*b_e_stride + k*b_k_stride
    + n*b_n_stride (natural weight layouts; the strides say which of them is transposed).
    N counts output columns: FC1 activation columns (F) for EPI_GLU, and for EPI_DGLU too.
    - EPI_STORE: c (T, N) row stride ldc = acc (+ probs[t] * bias[e, n] with HAS_BIAS).
    - EPI_GLU: B's columns gate g(j) and up u(j) are two dots; z_ptr (T, 2F) row stride ldz
      receives z at g(j), u(j) (+ fc1 bias[e, .] with HAS_BIAS); c (T, F) = h = p * act(z).
    - EPI_DGLU: acc = dh (A = dy, B = W2_e); z_ptr holds the saved z; c_ptr (T, 2F) receives
      dz at g(j), u(j); part_ptr (T, n_part_cols) float32 receives sum_j dh * act(z) per
      BLOCK_N columns (the dprob partials, each written once: no atomics; n_part_cols is
      2 * cdiv(N, 2 * BLOCK_N), a wholly masked half writes 0). A program's tile is 2 * BLOCK_N
      columns of dh as two BLOCK_N-wide dots sharing the A tile, as the GLU's gate and up
      dots do, so the MMA is as wide as the GLU's while the epilogue, which holds dh, z's
      gate and up and their gradients at once, runs on one BLOCK_N-wide half at a time.
      QUANT_DZ: also writes dz's fp8_block row-wise copy to q_ptr / q_scale_ptr
      (dglu_quantize_dz).

    Quantized operands (RECIPE != RECIPE_NONE; the module docstring has the arithmetic):
    - fp8_block: a_ptr (T, K) uint8 E4M3 bits, a_scale_ptr (K/128, T) float32 row stride
      a_scale_ld (each K chunk's row scales contiguous); b_ptr E4M3 bits with the strides
      above, b_scale_ptr float32 128x128 block scales, expert e's block (k // 128, n // 128)
      at e*b_scale_e_stride + (k//128)*b_scale_k_stride + (n//128)*b_scale_n_stride.
      BLOCK_K == 128, K % 128 == 0.
      GLU_UNIFORM_SCALE: each tile's gate columns share a scale block, and its up columns
      (launch.glu_scale_uniform; fp8_b_scale).
    - mxfp8 / nvfp4: a_ptr (T, K) E4M3 bytes or (T, K/2) packed E2M1 (row stride lda bytes),
      a_scale_ptr the flat swizzled scales of its (T, K/block) matrix (a_scale_ld padded
      columns); b_ptr the weight K-contiguous: expert e's row n at e*b_e_stride + n*b_n_stride
      (b_k_stride 1), b_scale_ptr the flat swizzled scales, expert e's row n at scale row
      e*b_scale_rows + n (b_scale_cols padded columns).
    - nvfp4: gscale_ptr (E,) float32, the product of the operands' per-tensor / per-expert
      decode scales, multiplies expert e's accumulator before the epilogue.

    TMA (16-bit operands without a recipe, or fp8_block's float8 operands; their scales
    through pointers): A and B are read through the tensor descriptors
    a_desc ((T, K), tile [BLOCK_M, BLOCK_K]) and b_desc (the weight as B_MODE says,
    tma_b_tile; b_rows: the weight rows per expert for TMA_B_ROWS) instead of the pointers;
    the same tiles and dots, so the same results. Z_MODE (EPI_DGLU): how the epilogue reads
    the saved z (load_z_pair; z_desc where it is a descriptor); the dprob partials' row sums
    follow the layout z arrives in, so through a descriptor they are summed in another order
    than through pointers (equal to rounding; every other output bitwise the same).
    """
    pid = tl.program_id(0)
    n_programs = tl.num_programs(0)
    TWO_DOTS: tl.constexpr = EPILOGUE != EPI_STORE
    TILE_N: tl.constexpr = 2 * BLOCK_N if EPILOGUE == EPI_DGLU else BLOCK_N
    n_col_tiles = tl.cdiv(N, TILE_N)
    expert = 0
    tiles_before = 0
    rows_before = 0
    m_expert = tl.load(counts_ptr).to(tl.int32)
    for tile in range(pid, n_row_tiles_bound * n_col_tiles, n_programs):
        row_tile = tile // n_col_tiles
        col_tile = tile % n_col_tiles
        expert, tiles_before, rows_before, m_expert = advance_expert(row_tile, counts_ptr, E, expert, tiles_before,
                                                                     rows_before, m_expert, BLOCK_M)
        if expert < E:
            row_start = rows_before + (row_tile - tiles_before) * BLOCK_M
            row_end = rows_before + m_expert
            rows = row_start + tl.arange(0, BLOCK_M)
            rmask = (rows < row_end) & (rows < T)
            rows64 = rows.to(tl.int64)
            n = col_tile * TILE_N + tl.arange(0, BLOCK_N)
            nmask = n < N
            expert64 = expert.to(tl.int64)
            b_base = b_ptr + expert64 * b_e_stride
            b_scale_base = b_scale_ptr + expert64 * b_scale_e_stride
            b_scale_row0 = expert64 * b_scale_rows
            # The columns of B the two dots read: the GLU's gate and up columns, the dGLU's two
            # halves (gate_n the first, up_n the second), or one dot (EPI_STORE).
            up_mask = nmask
            if EPILOGUE == EPI_GLU:
                gate_n, up_n = glu_cols(n, F, INTERLEAVE)
                gate0, up0 = glu_cols(col_tile * BLOCK_N, F, INTERLEAVE)
                uniform = GLU_UNIFORM_SCALE
            else:
                gate_n = n
                up_n = n + BLOCK_N
                up_mask = up_n < N
                gate0 = col_tile * TILE_N
                up0 = gate0 + BLOCK_N
                uniform = BLOCK_N <= 128
            # TMA: the first weight row (TMA_B_ROWS) or column (TMA_B_COLS) of each dot's B tile,
            # or the first activation column whose runs it reads (TMA_B_RUNS).
            b_gate0 = gate0
            b_up0 = up0
            if B_MODE == TMA_B_RUNS:
                b_gate0 = col_tile * BLOCK_N
                b_up0 = b_gate0
            acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
            acc_up = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
            # fp8_block: each chunk's scales are loaded one chunk ahead, so their latency
            # overlaps the previous chunk's dot (a load feeding only the epilogue math is not
            # software-pipelined by the compiler). Placeholders for the other recipes.
            a_scale_next = rmask.to(tl.float32)
            gate_scale_next = tl.full((BLOCK_N,), 1.0, tl.float32)
            up_scale_next = gate_scale_next
            if RECIPE == RECIPE_FP8_BLOCK:
                a_scale_next, gate_scale_next, up_scale_next = fp8_chunk_scales(
                    a_scale_ptr, rows64, rmask, a_scale_ld, b_scale_base, b_scale_k_stride, b_scale_n_stride, 0,
                    gate0, gate_n, up0, up_n, nmask, up_mask, uniform, TWO_DOTS, BLOCK_N)
            for k0 in range(0, K, BLOCK_K):
                k = k0 + tl.arange(0, BLOCK_K)
                kmask = k < K
                a_scale = a_scale_next
                gate_scale = gate_scale_next
                up_scale = up_scale_next
                if RECIPE == RECIPE_FP8_BLOCK:
                    a_scale_next, gate_scale_next, up_scale_next = fp8_chunk_scales(
                        a_scale_ptr, rows64, rmask, a_scale_ld, b_scale_base, b_scale_k_stride, b_scale_n_stride,
                        tl.minimum(k0 + BLOCK_K, K - BLOCK_K),   # the last chunk reloads itself
                        gate0, gate_n, up0, up_n, nmask, up_mask, uniform, TWO_DOTS, BLOCK_N)
                if TMA:
                    a = a_desc.load([row_start, k0])
                    b = tma_b_tile(b_desc, expert, b_gate0, k0, b_rows, K, 0, F, INTERLEAVE, B_MODE, BLOCK_N, BLOCK_K)
                    acc = tma_dot(acc, a, b, a_scale, gate_scale, IEEE, RECIPE)
                    if TWO_DOTS:
                        b = tma_b_tile(b_desc, expert, b_up0, k0, b_rows, K, 1, F, INTERLEAVE, B_MODE, BLOCK_N,
                                       BLOCK_K)
                        acc_up = tma_dot(acc_up, a, b, a_scale, up_scale, IEEE, RECIPE)
                else:
                    a = load_a_tile(a_ptr, a_scale_ptr, rows64, k, rmask, kmask, lda, a_scale_ld, RECIPE)
                    acc = mma_b_tile(acc, a, a_scale, gate_scale, b_base, b_scale_base, b_scale_row0, k, gate_n,
                                     kmask, nmask, b_k_stride, b_n_stride, b_scale_cols, IEEE, RECIPE)
                    if TWO_DOTS:
                        acc_up = mma_b_tile(acc_up, a, a_scale, up_scale, b_base, b_scale_base, b_scale_row0, k,
                                            up_n, kmask, up_mask, b_k_stride, b_n_stride, b_scale_cols, IEEE, RECIPE)
            if RECIPE == RECIPE_NVFP4:
                decode_scale = tl.load(gscale_ptr + expert64)
                acc = acc * decode_scale
                acc_up = acc_up * decode_scale
            mask = rmask[:, None] & nmask[None, :]
            if EPILOGUE == EPI_STORE:
                if HAS_BIAS:
                    p = tl.load(probs_ptr + rows64, mask=rmask, other=0.0).to(tl.float32)
                    bias = tl.load(bias_ptr + expert.to(tl.int64) * bias_e_stride + n, mask=nmask,
                                   other=0.0).to(tl.float32)
                    acc += p[:, None] * bias[None, :]
                tl.store(c_ptr + rows64[:, None] * ldc + n[None, :], to_output(acc, c_ptr), mask=mask)
            elif EPILOGUE == EPI_GLU:
                if HAS_BIAS:
                    bias_base = bias_ptr + expert.to(tl.int64) * bias_e_stride
                    acc += tl.load(bias_base + gate_n, mask=nmask, other=0.0).to(tl.float32)[None, :]
                    acc_up += tl.load(bias_base + up_n, mask=nmask, other=0.0).to(tl.float32)[None, :]
                zg = to_output(acc, z_ptr)
                zu = to_output(acc_up, z_ptr)
                tl.store(z_ptr + rows64[:, None] * ldz + gate_n[None, :], zg, mask=mask)
                tl.store(z_ptr + rows64[:, None] * ldz + up_n[None, :], zu, mask=mask)
                # h from the stored (rounded) z, so the backward's recomputation sees the same a.
                p = tl.load(probs_ptr + rows64, mask=rmask, other=0.0).to(tl.float32)
                h = p[:, None] * glu_act(zg.to(tl.float32), zu.to(tl.float32), ACT)
                tl.store(c_ptr + rows64[:, None] * ldc + n[None, :], to_output(h, c_ptr), mask=mask)
            else:
                up_tile_mask = rmask[:, None] & up_mask[None, :]
                zg, zu = load_z_pair(z_ptr, z_desc, gate_n, gate0, mask, rows64, row_start, ldz, F, INTERLEAVE,
                                     Z_MODE, BLOCK_M, BLOCK_N)
                dglu_store(acc, zg, zu, gate_n, mask, rows64, rmask, probs_ptr, c_ptr, part_ptr, ldc, F,
                           n_part_cols, 2 * col_tile, INTERLEAVE, ACT)
                zg, zu = load_z_pair(z_ptr, z_desc, up_n, up0, up_tile_mask, rows64, row_start, ldz, F, INTERLEAVE,
                                     Z_MODE, BLOCK_M, BLOCK_N)
                dglu_store(acc_up, zg, zu, up_n, up_tile_mask, rows64, rmask, probs_ptr, c_ptr, part_ptr, ldc, F,
                           n_part_cols, 2 * col_tile + 1, INTERLEAVE, ACT)
                if QUANT_DZ:
                    tl.debug_barrier()   # the dz stores above are visible to every thread of the program
                    dglu_quantize_dz(c_ptr, q_ptr, q_scale_ptr, gate_n, gate0, mask, rows64, rmask, T, ldc, F,
                                     INTERLEAVE, BLOCK_M, BLOCK_N)
                    dglu_quantize_dz(c_ptr, q_ptr, q_scale_ptr, up_n, up0, up_tile_mask, rows64, rmask, T, ldc, F,
                                     INTERLEAVE, BLOCK_M, BLOCK_N)


@triton.jit
def _expert_blocks(counts_ptr, expert, BLOCK: tl.constexpr):
    """sum of cdiv(count, BLOCK) over the experts before ``expert``, from the device-side
    counts summed EXPERT_CHUNK at a time as vectors (one step up to 128 experts), not one load
    per expert in sequence: with BLOCK 1 the expert's first row; else its first BLOCK-token
    block in the grouped layout of the column-wise copies (each expert's tokens padded to a
    multiple of BLOCK, end to end: quant.kernels.group_rows). For the fp8_block wgrad at its
    register cap the vector sum ran the launch 1.0-1.9x faster than a sequential scan, most at
    128 experts (results/2026-12-02-h200-r run 7)."""
    blocks = 0
    for e0 in range(0, expert, EXPERT_CHUNK):
        e = e0 + tl.arange(0, EXPERT_CHUNK)
        c = tl.load(counts_ptr + e, mask=e < expert, other=0).to(tl.int32)
        blocks += tl.sum((c + BLOCK - 1) // BLOCK)
    return blocks


@triton.jit
def _expert_rows(counts_ptr, expert):
    """(first row, row count) of ``expert`` from the device-side counts (_expert_blocks)."""
    return _expert_blocks(counts_ptr, expert, 1), tl.load(counts_ptr + expert).to(tl.int32)


@triton.jit
def wgrad_tile(pid, N, M, BLOCK_N: tl.constexpr, BLOCK_M: tl.constexpr, GROUP_N: tl.constexpr):
    """(expert, row tile, column tile) of wgrad program ``pid``: experts in order; within one,
    column tiles sweep a group of GROUP_N row tiles before the next group (the GEMM tutorials'
    grouped order), so programs running together share both operands' tiles (launch.py:
    on the H200 the group size made no measurable difference)."""
    n_tiles = tl.cdiv(N, BLOCK_N)
    m_tiles = tl.cdiv(M, BLOCK_M)
    per_expert = n_tiles * m_tiles
    expert = pid // per_expert
    local = pid % per_expert
    first_n = (local // (GROUP_N * m_tiles)) * GROUP_N
    group_rows = tl.minimum(n_tiles - first_n, GROUP_N)
    tile_n = first_n + local % group_rows
    tile_m = (local % (GROUP_N * m_tiles)) // group_rows
    return expert, tile_n, tile_m


@triton.jit
def wgrad_fp8_scales(a_scale_ptr, b_scale_ptr, n64, m64, nmask, mmask, block, a_scale_ld, b_scale_ld):
    """fp8_block wgrad: the scales of the 128-token block number ``block`` for columns n of A
    and m of B (copies' scales stored (Tp/128, columns): two contiguous vectors)."""
    a_scale = tl.load(a_scale_ptr + block * a_scale_ld + n64, mask=nmask, other=0.0)
    b_scale = tl.load(b_scale_ptr + block * b_scale_ld + m64, mask=mmask, other=0.0)
    return a_scale, b_scale


@triton.jit
def wgrad_fp8_step(acc, a_ptr, b_ptr, a_scale, b_scale, n64, m64, nmask, mmask, t0, lda, ldb,
                   BLOCK_K: tl.constexpr):
    """acc + the fp8_block wgrad product of the 128-token block at t0 of the column-wise copies
    with its scales, through pointers (grouped_wgrad_kernel without TMA). The block holds one
    expert's tokens and zero codes after them, so nothing along t is masked."""
    t = t0 + tl.arange(0, BLOCK_K)
    at = load_fp8(a_ptr, n64[:, None] * lda + t[None, :], nmask[:, None])
    b = load_fp8(b_ptr, m64[None, :] * ldb + t[:, None], mmask[None, :])
    return fp8_scaled_dot(acc, at, b, a_scale, b_scale)


@triton.jit
def grouped_wgrad_kernel(
    a_ptr, b_ptr, c_ptr, counts_ptr, a_scale_ptr, b_scale_ptr, gscale_ptr, a_desc, b_desc,
    T, N, M, lda, ldb, a_scale_ld, b_scale_ld,
    IEEE: tl.constexpr, RECIPE: tl.constexpr, TMA: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_N: tl.constexpr,
):
    """Ragged-K weight gradients: C[e] (N, M) = A[rows of e]^T @ B[rows of e].

    a_ptr: (T, N) row stride lda (dz for dW1, dy for dW2); b_ptr: (T, M) row stride ldb (x, h).
    c_ptr: (E, N, M) contiguous, written in full (zeros for experts without tokens).
    Grid: E * cdiv(N, BLOCK_N) * cdiv(M, BLOCK_M) programs, one output tile each, in the order
    of wgrad_tile; K walks the expert's rows in BLOCK_K steps.

    Quantized (RECIPE != RECIPE_NONE): the column-wise copies A^T (N, Tp) and B^T (M, Tp),
    quantized along the token axis in the grouped layout (recipes.quantize_cols: each
    expert's tokens from its own first, padded with zeros to a multiple of the recipe's block,
    the experts end to end; Tp = quant.launch.grouped_rows(T, E, block)), row strides lda, ldb
    (bytes; nvfp4 rows hold Tp / 2). Expert e's K steps walk its own padded tokens, so no
    block holds another expert's tokens and none is shared.
    fp8_block: a_scale_ptr (Tp/128, N), b_scale_ptr (Tp/128, M) float32, row strides
    a_scale_ld, b_scale_ld; BLOCK_K == 128, one K step a block, none masked along t.
    mxfp8 / nvfp4: flat swizzled scales with a_scale_ld, b_scale_ld padded columns, K steps
    masked to the expert's tokens. nvfp4: gscale_ptr[0] multiplies the result.

    TMA (16-bit without a recipe, or fp8_block): 16-bit, the K steps that lie wholly inside
    the expert's rows read A and B through a_desc and b_desc ((T, N) and (T, M), tiles
    [BLOCK_K, BLOCK_N] and [BLOCK_K, BLOCK_M]) and the last partial step loads masked through
    the pointers; fp8_block, every block through the descriptors of the copies (N, Tp) and
    (M, Tp), tiles [BLOCK_N | BLOCK_M, BLOCK_K]. The same steps in the same order as without
    TMA.
    """
    expert, tile_n, tile_m = wgrad_tile(tl.program_id(0), N, M, BLOCK_N, BLOCK_M, GROUP_N)
    n = tile_n * BLOCK_N + tl.arange(0, BLOCK_N)
    m = tile_m * BLOCK_M + tl.arange(0, BLOCK_M)
    nmask = n < N
    mmask = m < M
    start, count = _expert_rows(counts_ptr, expert)
    acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    if RECIPE == RECIPE_NONE:
        k_tail = 0
        if TMA:
            k_tail = (count // BLOCK_K) * BLOCK_K
            for k0 in range(0, k_tail, BLOCK_K):
                at = a_desc.load([start + k0, tile_n * BLOCK_N]).T
                b = b_desc.load([start + k0, tile_m * BLOCK_M])
                acc = dot_f32acc(at, b, acc, IEEE)
        for k0 in range(k_tail, count, BLOCK_K):
            rows = start + k0 + tl.arange(0, BLOCK_K)
            rmask = (rows < start + count) & (rows < T)
            rows64 = rows.to(tl.int64)
            at = tl.load(a_ptr + rows64[None, :] * lda + n[:, None], mask=nmask[:, None] & rmask[None, :],
                         other=0.0)
            b = tl.load(b_ptr + rows64[:, None] * ldb + m[None, :], mask=rmask[:, None] & mmask[None, :], other=0.0)
            acc = dot_f32acc(at, b, acc, IEEE)
    elif RECIPE == RECIPE_FP8_BLOCK:
        # K tiles: the expert's own 128-token blocks of the grouped copies, each whole (its
        # tokens, then zero codes): no mask along t, the contiguous axis, which would cut the
        # loads to single bytes and keep the loop from pipelining.
        n64 = n.to(tl.int64)
        m64 = m.to(tl.int64)
        first = _expert_blocks(counts_ptr, expert, BLOCK_K)
        end = first + tl.cdiv(count, BLOCK_K)
        # Scales one block ahead (their latency overlaps the previous block's dot); the index
        # stays inside the copies' blocks even when the loop does not run.
        a_next, b_next = wgrad_fp8_scales(a_scale_ptr, b_scale_ptr, n64, m64, nmask, mmask,
                                          tl.maximum(tl.minimum(first, end - 1), 0), a_scale_ld, b_scale_ld)
        for i in range(first, end):
            a_scale = a_next
            b_scale = b_next
            a_next, b_next = wgrad_fp8_scales(a_scale_ptr, b_scale_ptr, n64, m64, nmask, mmask,
                                              tl.minimum(i + 1, end - 1), a_scale_ld, b_scale_ld)
            if TMA:   # the copies (N, Tp) and (M, Tp) through descriptors, tiles [BLOCK_N | BLOCK_M, BLOCK_K]
                at = a_desc.load([tile_n * BLOCK_N, i * BLOCK_K])
                b = b_desc.load([tile_m * BLOCK_M, i * BLOCK_K]).T
                acc = fp8_scaled_dot(acc, at, b, a_scale, b_scale)
            else:
                acc = wgrad_fp8_step(acc, a_ptr, b_ptr, a_scale, b_scale, n64, m64, nmask, mmask, i * BLOCK_K, lda, ldb,
                                     BLOCK_K)
    else:
        n64 = n.to(tl.int64)
        m64 = m.to(tl.int64)
        if RECIPE == RECIPE_MXFP8:   # the expert's first token in the grouped copies
            start = _expert_blocks(counts_ptr, expert, 32) * 32
        else:
            start = _expert_blocks(counts_ptr, expert, 16) * 16
        for t0 in range(start, start + count, BLOCK_K):
            t = t0 + tl.arange(0, BLOCK_K)
            tmask = t < start + count
            amask = nmask[:, None] & tmask[None, :]
            bmask = tmask[:, None] & mmask[None, :]
            at = load_decoded(a_ptr, a_scale_ptr, n64[:, None] * lda, t[None, :], n64[:, None], amask,
                              a_scale_ld, RECIPE)
            b = load_decoded(b_ptr, b_scale_ptr, m64[None, :] * ldb, t[:, None], m64[None, :], bmask,
                             b_scale_ld, RECIPE)
            acc = dot_f32acc(at, b, acc, False)
        if RECIPE == RECIPE_NVFP4:   # an expert without tokens keeps its zeros (a NaN scale is another's)
            acc = acc * tl.where(count > 0, tl.load(gscale_ptr), 1.0)
    out = c_ptr + expert.to(tl.int64) * N * M + n[:, None] * M + m[None, :]
    tl.store(out, to_output(acc, c_ptr), mask=nmask[:, None] & mmask[None, :])


@triton.jit
def grouped_colsum_kernel(
    a_ptr, scale_ptr, c_ptr, counts_ptr, T, N, lda,
    HAS_SCALE: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_N: tl.constexpr,
):
    """Bias gradients: C[e, n] = sum over rows t of e of scale[t] * A[t, n] (scale = 1 without
    HAS_SCALE), float32 accumulation in row order; zeros for experts without tokens.
    Grid: (E, cdiv(N, BLOCK_N))."""
    expert = tl.program_id(0)
    n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    nmask = n < N
    start, count = _expert_rows(counts_ptr, expert)
    acc = tl.zeros((BLOCK_K, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, count, BLOCK_K):
        rows = start + k0 + tl.arange(0, BLOCK_K)
        rmask = (rows < start + count) & (rows < T)
        a = tl.load(a_ptr + rows.to(tl.int64)[:, None] * lda + n[None, :], mask=rmask[:, None] & nmask[None, :],
                    other=0.0).to(tl.float32)
        if HAS_SCALE:
            a = a * tl.load(scale_ptr + rows, mask=rmask, other=0.0).to(tl.float32)[:, None]
        acc += a
    tl.store(c_ptr + expert.to(tl.int64) * N + n, to_output(tl.sum(acc, axis=0), c_ptr), mask=nmask)
