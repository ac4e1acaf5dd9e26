"""Triton kernels of the quantizers. Only ``@triton.jit`` code; launch.py launches.

Each program quantizes one (BLOCK_M rows x BLOCK_K columns) tile of x (rows, K): BLOCK_K is a
multiple of the scaling block's width, BLOCK_M of its height, so a tile holds whole scaling
blocks (rows past the end are loaded as 0, which changes no block amax). The tile's block amax,
its scales and its data follow reference.py's formulas in the same order, so results are bit
for bit those of reference.py.

Conversions are integer bit manipulation, the same code compiled and interpreted, because
Triton's interpreter converts float32 -> float8e4nv wrongly (ties round up, not to even; below
2^-6 it truncates; 470 becomes 0x7F = NaN, 500 and inf 0x78, NaN 0x7C) and decodes 0x7F as 480.
Compiled, ``.to(tl.float8e4nv)`` is cvt.rn.satfinite, which saturates to +-448 as reference.py's
clamp before its cast does (torch's own cast changed its overflow rule between versions; 2.13
saturates), so the data path (e4m3_codes) needs no clamp. Every fp32 division is
``tl.math.div_rn`` (IEEE): plain ``/`` compiles to an approximate division on NVIDIA GPUs.
"""

import triton
import triton.language as tl

from ..ops.triton_common import INTERPRETER as _INTERPRETER
from .formats import E2M1_MAX, E4M3_MAX, FP32_MAX, NVFP4_GLOBAL, ONE_SIXTH_F32, RHT_SIGN_MASK

_FP32_MAX = tl.constexpr(FP32_MAX)
_E4M3_MAX = tl.constexpr(E4M3_MAX)
_E2M1_MAX = tl.constexpr(E2M1_MAX)
_NVFP4_GLOBAL = tl.constexpr(NVFP4_GLOBAL)
_ONE_SIXTH = tl.constexpr(ONE_SIXTH_F32)
_RHT_SIGN_MASK = tl.constexpr(RHT_SIGN_MASK)
# NaN is built from its bits, not held in a constexpr global: Triton checks that a global has
# the same value in every kernel that uses it, and nan != nan fails that check when compiling.
_NAN_BITS = tl.constexpr(0x7FC00000)
_INF = tl.constexpr(float("inf"))


# ---------------------------------------------------------------------------------------------
# NaN-propagating min / clamp (torch.minimum / torch.clamp semantics; the GPU's min.f32
# returns the non-NaN operand, numpy's the NaN)


@triton.jit
def nan_where(cond, v):
    """v, with the canonical float32 NaN (0x7FC00000) where cond."""
    return tl.where(cond, tl.full(v.shape, _NAN_BITS, tl.uint32).to(tl.float32, bitcast=True), v)


@triton.jit
def _min_nan(v, hi):
    return tl.where(v != v, v, tl.minimum(v, hi))


@triton.jit
def _clamp_nan(v, lo, hi):
    return tl.where(v != v, v, tl.minimum(tl.maximum(v, lo), hi))


# ---------------------------------------------------------------------------------------------
# Bit-level conversions


@triton.jit
def e4m3_bits(v):
    """float32 -> float8_e4m3fn bits (uint32 in 0..255), round to nearest even: torch's
    fp8e4m3fn_from_fp32_value (c10) step for step (saturating to +-448), except NaN -> 0x7F."""
    bits = v.to(tl.uint32, bitcast=True)
    sign = (bits >> 24) & 0x80
    a = bits & 0x7FFFFFFF
    # |v| < 2^-6 (e4m3 subnormal): adding 2^14 leaves |v| rounded (RNE) to a multiple of 2^-9
    # in the low mantissa bits. An fp32 subnormal |v| rounds to 0 either way, so flushing it is
    # harmless.
    sub = (a.to(tl.float32, bitcast=True) + 16384.0).to(tl.uint32, bitcast=True) - 0x46800000
    # Normal: rebias the exponent (127 -> 7) and round away 20 mantissa bits to nearest even.
    nrm = (a + 0xC407FFFF + ((a >> 20) & 1)) >> 20
    nrm = tl.where(nrm == 0x7F, 0x7E, nrm)
    r = tl.where(a < 0x3C800000, sub, nrm)            # 0x3C800000 = 2^-6
    r = tl.where(a >= 0x43F00000, 0x7E, r)            # 0x43F00000 = 480: saturate
    r = (r & 0x7F) | sign
    return tl.where(a > 0x7F800000, 0x7F, r)


@triton.jit
def e4m3_codes(v, BYTEWISE: tl.constexpr = False):
    """E4M3 codes (uint8) of v, the float32 result of an arithmetic operation (x times its
    block's scale factor), as e4m3_bits gives them, for the data path, where it runs once per
    element. Compiled, the hardware's cvt.rn.satfinite alone (one instruction per two elements
    instead of about fifteen integer operations each; same results: round to nearest even
    including subnormals, saturation to +-448 for finite and infinite inputs). The conversion
    keeps a NaN's sign, but a NaN that arithmetic produced is the GPU's one float32 NaN,
    0x7FFFFFFF, whatever the NaN operands' signs (NVIDIA GPUs carry no NaN payload or sign
    through arithmetic), so it converts to 0x7F as e4m3_bits does. The interpreter's conversion
    is wrong (module docstring), so it runs e4m3_bits itself. Parity with reference.py, NaN and
    negative NaN inputs included, is tested bitwise on the GPU.

    BYTEWISE: each code is taken out of the conversion's packed pair as a uint32 and tested
    for NaN before any use (a few instructions more per element). fp8_block_kernel's weight
    pair needs it: it stores the packed pairs in one layout and moves single codes through
    shared memory for the other, and without it, under triton 3.6 on the H200, many high bytes
    of the pairs come out 0x00 in the second copy (results/2026-11-30-h200-f runs 2 and 3; the
    PTX extracts them right; the cause was not found). Its pair of an activation's row-wise
    and column-wise copies (two code tiles from one read, one stored row-major, one transposed
    through shared memory) takes it too, as a launch like the one that failed; it was not
    tried without."""
    if _INTERPRETER:
        codes = e4m3_bits(v).to(tl.uint8)
    else:
        codes = v.to(tl.float8e4nv).to(tl.uint8, bitcast=True)
        if BYTEWISE:
            codes = tl.where(v != v, 0x7F, codes.to(tl.uint32)).to(tl.uint8)
    return codes


@triton.jit
def e4m3_value(b):
    """float8_e4m3fn bits (uint32) -> float32 (exact; 0x7F / 0xFF -> NaN)."""
    mag = b & 0x7F
    exp = mag >> 3
    man = mag & 7
    normal = (((exp + 120) << 23) | (man << 20)).to(tl.float32, bitcast=True)
    val = tl.where(exp == 0, man.to(tl.float32) * 0.001953125, normal)   # subnormal: man * 2^-9
    val = tl.where((b & 0x80) != 0, -val, val)
    return nan_where(mag == 0x7F, val)


@triton.jit
def e8m0_bits(q):
    """float32 q >= 0 -> biased E8M0 exponent (uint32): exponent rounded up when the mantissa is
    non-zero (subnormal q: when q > 2^-127), at most 0xFE; inf -> 0xFE; NaN -> 0xFF."""
    bits = q.to(tl.uint32, bitcast=True)
    exp = (bits >> 23) & 0xFF
    man = bits & 0x7FFFFF
    up = (man > 0) & (exp != 0xFE) & ~((exp == 0) & (man <= 0x400000))
    e = exp + up.to(tl.uint32)
    e = tl.where(q == _INF, 0xFE, e)
    return tl.where(q != q, 0xFF, e)


@triton.jit
def e8m0_reciprocal(e):
    """Biased E8M0 exponent (uint32) -> float32 2^(127 - e); NaN for 0xFF."""
    bits = tl.where(e <= 253, (254 - e) << 23, 0x00400000)
    val = bits.to(tl.float32, bitcast=True)
    return nan_where(e == 0xFF, val)


@triton.jit
def e2m1_codes(v, sign_of):
    """E2M1 codes (uint32 0..15) of v (clamped to +-6), ties to even; the sign from sign_of
    (positive for a NaN sign_of, whose sign bit is not portable); NaN v -> magnitude 0."""
    a = tl.abs(v)
    mag = ((a > 0.25).to(tl.uint32) + (a >= 0.75).to(tl.uint32) + (a > 1.25).to(tl.uint32)
           + (a >= 1.75).to(tl.uint32) + (a > 2.5).to(tl.uint32) + (a >= 3.5).to(tl.uint32)
           + (a > 5.0).to(tl.uint32))
    return mag | _sign_bit(sign_of) << 3


@triton.jit
def e2m1_codes_stochastic(v, sign_of, rand):
    """Stochastic E2M1 codes: up to the next grid point iff rand < floor(t * 2^32), t the exact
    position of |v| between its grid neighbours (reference.e2m1_codes_stochastic)."""
    a = tl.abs(v)
    lo_code = ((a >= 0.5).to(tl.uint32) + (a >= 1.0).to(tl.uint32) + (a >= 1.5).to(tl.uint32)
               + (a >= 2.0).to(tl.uint32) + (a >= 3.0).to(tl.uint32) + (a >= 4.0).to(tl.uint32)
               + (a >= 6.0).to(tl.uint32))
    lo = tl.where(a >= 6.0, 6.0, tl.where(a >= 4.0, 4.0, tl.where(a >= 3.0, 3.0, tl.where(
        a >= 2.0, 2.0, tl.where(a >= 1.5, 1.5, tl.where(a >= 1.0, 1.0, tl.where(a >= 0.5, 0.5, 0.0)))))))
    inv_step = tl.where(a < 2.0, 2.0, tl.where(a < 4.0, 1.0, 0.5))
    t = (a - lo) * inv_step
    frac = tl.where(t == t, t * 4294967296.0, 0.0).to(tl.uint32)
    code = lo_code + (rand < frac).to(tl.uint32)
    return code | _sign_bit(sign_of) << 3


@triton.jit
def _sign_bit(t):
    return (t.to(tl.uint32, bitcast=True) >> 31) & (t == t).to(tl.uint32)


# ---------------------------------------------------------------------------------------------
# Tiles and blocks


@triton.jit
def tile_origin(BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    """(first row, first column) of this program's tile in a grid of row tiles on axis 0 and
    column tiles folded over axes 1 and 2 (launch.rows_cols_grid: CUDA caps those at 65535
    each); a program past the last column tile gets columns that are all masked. int32: the
    API refuses rows or K of 2**31 - 2**24 or more (api.MAX_EXTENT), so that the padding
    programs' columns do not wrap past 2**31 to negative (unmasked) ones."""
    tile_k = tl.program_id(2) * tl.num_programs(1) + tl.program_id(1)
    return tl.program_id(0) * BLOCK_M, tile_k * BLOCK_K


@triton.jit
def load_tile(x_ptr, row0, col0, n_rows, n_cols, stride_r, stride_c,
              BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    """The (BLOCK_M, BLOCK_K) float32 tile at (row0, col0); 0 outside x."""
    rows = row0 + tl.arange(0, BLOCK_M)
    cols = col0 + tl.arange(0, BLOCK_K)
    mask = (rows < n_rows)[:, None] & (cols < n_cols)[None, :]
    ptrs = x_ptr + rows.to(tl.int64)[:, None] * stride_r + cols.to(tl.int64)[None, :] * stride_c
    return tl.load(ptrs, mask=mask, other=0.0).to(tl.float32)


@triton.jit
def block_amax(x, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr,
               BR: tl.constexpr, BC: tl.constexpr):
    """(BLOCK_M // BR, BLOCK_K // BC) amax(|x|) per BR x BC block; NaN for a block holding a
    NaN or +-inf (max is exact, so the reduction order does not matter).

    The max runs on the magnitudes' bits as unsigned integers (one AND and one integer max per
    element): for non-negative floats they order as the values, and every NaN's bits lie above
    +inf's (0x7F800000), so a block's maximum is at least 0x7F800000 exactly when it holds a
    NaN or an inf."""
    bits = x.to(tl.uint32, bitcast=True) & 0x7FFFFFFF
    bits = tl.reshape(bits, (BLOCK_M // BR, BR, BLOCK_K // BC, BC))
    m = tl.max(tl.max(bits, axis=3), axis=1)
    return nan_where(m >= 0x7F800000, m.to(tl.float32, bitcast=True))


@triton.jit
def expand_blocks(s, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr,
                  BR: tl.constexpr, BC: tl.constexpr):
    """(BLOCK_M // BR, BLOCK_K // BC) -> (BLOCK_M, BLOCK_K), each block's value repeated."""
    s = tl.broadcast_to(s[:, None, :, None], (BLOCK_M // BR, BR, BLOCK_K // BC, BC))
    return tl.reshape(s, (BLOCK_M, BLOCK_K))


@triton.jit
def _butterfly(x, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr, H: tl.constexpr):
    """(a, b) -> (a + b, a - b) for the element pairs (j, j + H) with bit H of j clear."""
    y = tl.permute(tl.reshape(x, (BLOCK_M, BLOCK_K // (2 * H), 2, H)), (0, 1, 3, 2))
    a, b = tl.split(y)
    y = tl.permute(tl.join(a + b, a - b), (0, 1, 3, 2))
    return tl.reshape(y, (BLOCK_M, BLOCK_K))


@triton.jit
def rht16(x, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    """reference.hadamard16 on a tile: signs, butterflies at distance 1, 2, 4, 8, then / 4."""
    lane = tl.arange(0, BLOCK_K) % 16
    negative = (tl.full((BLOCK_K,), _RHT_SIGN_MASK, tl.int32) >> lane) & 1
    x = tl.where(negative[None, :] != 0, -x, x)
    x = _butterfly(x, BLOCK_M, BLOCK_K, 1)
    x = _butterfly(x, BLOCK_M, BLOCK_K, 2)
    x = _butterfly(x, BLOCK_M, BLOCK_K, 4)
    x = _butterfly(x, BLOCK_M, BLOCK_K, 8)
    return x * 0.25


@triton.jit
def swizzled_offset(r, c, padded_cols):
    """Byte offset of scale (r, c) in a flat 128x4-swizzled buffer of padded_cols columns
    (swizzle.py)."""
    return (((r // 128) * (padded_cols // 4) + c // 4) * 512
            + (r % 32) * 16 + ((r // 32) % 4) * 4 + (c % 4))


@triton.jit
def store_scales(scale_ptr, vals, srow0, scol0, n_srows, n_scols, stride_r, stride_c, padded_cols,
                 SR: tl.constexpr, SC: tl.constexpr, SWIZZLE: tl.constexpr):
    """Store an (SR, SC) block of the (n_srows, n_scols) scale matrix at (srow0, scol0):
    entry (r, c) at r * stride_r + c * stride_c, or with SWIZZLE at the 128x4 swizzled offsets
    (padded_cols: the padded column count)."""
    r = (srow0 + tl.arange(0, SR)).to(tl.int64)
    c = (scol0 + tl.arange(0, SC)).to(tl.int64)
    mask = (r < n_srows)[:, None] & (c < n_scols)[None, :]
    r = r[:, None]
    c = c[None, :]
    if SWIZZLE:
        off = swizzled_offset(r, c, padded_cols)
    else:
        off = r * stride_r + c * stride_c
    tl.store(scale_ptr + off, vals, mask=mask)


@triton.jit
def _store_tile(ptr, vals, row0, col0, n_rows, n_cols, stride_r, stride_c,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Store the tile at (row0, col0) of an (n_rows, n_cols) matrix, element (r, c) at
    r * stride_r + c * stride_c."""
    rows = (row0 + tl.arange(0, BLOCK_M)).to(tl.int64)
    cols = (col0 + tl.arange(0, BLOCK_N)).to(tl.int64)
    mask = (rows < n_rows)[:, None] & (cols < n_cols)[None, :]
    tl.store(ptr + rows[:, None] * stride_r + cols[None, :] * stride_c, vals, mask=mask)


@triton.jit
def fp8_block_scales(amax, POW2: tl.constexpr):
    """(enc, scale) per block from its amax: enc = 448 / amax (1 for amax 0, at most FP32_MAX,
    with POW2 rounded down to a power of two), scale = 1 / enc (the stored dequantization
    scale); NaN amax -> NaN enc and scale (reference.py's fp8 block scaling)."""
    enc = tl.where(amax == 0.0, 1.0,
                   _min_nan(tl.math.div_rn(tl.full(amax.shape, _E4M3_MAX, tl.float32), amax), _FP32_MAX))
    if POW2:
        pow2 = (enc.to(tl.uint32, bitcast=True) & 0x7F800000).to(tl.float32, bitcast=True)
        enc = tl.where(enc != enc, enc, pow2)
    scale = tl.math.div_rn(tl.full(enc.shape, 1.0, tl.float32), enc)
    return enc, nan_where(scale != scale, scale)


@triton.jit
def fp8_codes(x, enc, BYTEWISE: tl.constexpr = False):
    """E4M3 codes (uint8) of the float32 x times its block's enc (broadcast to x), saturated to
    +-448 by the conversion itself (the hardware's satfinite, or e4m3_bits), as reference.py's
    clamp before its cast does."""
    return e4m3_codes(x * enc, BYTEWISE)


@triton.jit
def fp8_encode(x, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr, BR: tl.constexpr, BC: tl.constexpr,
               POW2: tl.constexpr, BYTEWISE: tl.constexpr = False):
    """(E4M3 codes uint8, float32 scales per BR x BC block) of a float32 tile (BYTEWISE:
    e4m3_codes)."""
    enc, scale = fp8_block_scales(block_amax(x, BLOCK_M, BLOCK_K, BR, BC), POW2)
    return fp8_codes(x, expand_blocks(enc, BLOCK_M, BLOCK_K, BR, BC), BYTEWISE), scale


@triton.jit
def fp8_store(data_ptr, scale_ptr, codes, scale, row0, col0, rows_out, n_cols, d_stride_r, d_stride_c,
              s_stride_r, s_stride_c, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr, BR: tl.constexpr,
              BC: tl.constexpr):
    """Store an fp8 tile's codes and its BR x BC block scales at (row0, col0) of a
    (rows_out, n_cols) matrix through strides."""
    _store_tile(data_ptr, codes, row0, col0, rows_out, n_cols, d_stride_r, d_stride_c, BLOCK_M, BLOCK_K)
    store_scales(scale_ptr, scale, row0 // BR, col0 // BC, (rows_out + BR - 1) // BR, n_cols // BC, s_stride_r,
                 s_stride_c, 0, BLOCK_M // BR, BLOCK_K // BC, False)


@triton.jit
def group_rows(counts_ptr, n_groups, block, n_rows, BLOCK: tl.constexpr, CHUNK: tl.constexpr):
    """(first row, end row) of x's rows in BLOCK-row block number ``block`` of the grouped
    layout: the groups (counts_ptr[0 : n_groups], int32 or int64 on the device, consecutive
    rows of x in order) each padded to a multiple of BLOCK rows and laid end to end, so that
    every block holds rows of one group only, starting at a multiple of BLOCK rows after the
    group's first. A block past the last group's holds no rows (end == first). Counts are
    read CHUNK at a time as vectors, each clamped to [0, n_rows] before any arithmetic (in
    int64), and rows are clipped to [0, n_rows), so no count, however large, negative or wrong in sum,
    makes an access out of bounds (grouped_glu_mlp asserts valid counts on the device; with
    counts that do not sum to n_rows the rows no block covers are not stored)."""
    first = tl.full([], 0, tl.int64)         # the block's first row, from the group holding it
    n = tl.full([], 0, tl.int64)             # its rows there
    rows_seen = tl.full([], 0, tl.int64)     # rows of the groups read so far
    blocks_seen = tl.full([], 0, tl.int64)   # their blocks
    for g0 in range(0, n_groups, CHUNK):
        g = g0 + tl.arange(0, CHUNK)
        c = tl.minimum(tl.maximum(tl.load(counts_ptr + g, mask=g < n_groups, other=0).to(tl.int64), 0), n_rows)
        nb = (c + BLOCK - 1) // BLOCK
        start = rows_seen + tl.cumsum(c, 0) - c            # each group's first row
        local = block - (blocks_seen + tl.cumsum(nb, 0) - nb)   # the block's index within each group
        holds = (local >= 0) & (local < nb)                # one group at most holds the block
        first += tl.sum(tl.where(holds, start + local * BLOCK, 0))
        n += tl.sum(tl.where(holds, tl.minimum(c - local * BLOCK, BLOCK), 0))
        rows_seen += tl.sum(c)
        blocks_seen += tl.sum(nb)
    first = tl.minimum(first, n_rows)
    return first, tl.minimum(first + n, n_rows)


@triton.jit
def group_table_kernel(counts_ptr, n_groups, n_rows, table_ptr, BLOCK: tl.constexpr, CHUNK: tl.constexpr):
    """table[b] = (first row, end row) of x's rows in block b of the grouped layout
    (group_rows), int32 pairs; one program a block. fp8_block_kernel's GROUPED programs read
    their block's two integers from it rather than each scanning the counts, a scan (a load
    and, in int64, two prefix sums and four sums) that would cost its 128 x 64 column copy
    about 5 SASS instructions an element on sm_90, all before the tile's load can start
    (benchmarks/results/2026-12-05-h200-al run 1 timed that form: 0.63-0.74x the copy of the
    global layout)."""
    b = tl.program_id(0)
    first, end = group_rows(counts_ptr, n_groups, b, n_rows, BLOCK, CHUNK)
    tl.store(table_ptr + 2 * b, first.to(tl.int32))
    tl.store(table_ptr + 2 * b + 1, end.to(tl.int32))


@triton.jit
def _encode_tile(x, has_rows, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr, BR: tl.constexpr, BC: tl.constexpr,
                 POW2: tl.constexpr, BYTEWISE: tl.constexpr, GROUPED: tl.constexpr):
    """fp8_encode of fp8_block_kernel's tile, except GROUPED for a block of the grouped layout
    past the last group's (has_rows false): an all-zero block's codes and scale (1.0, what
    fp8_block_scales gives an amax of 0) without the encoding's arithmetic, so the E - 1 zero
    blocks the layout may end with cost their stores only."""
    if GROUPED:
        if has_rows:
            codes, scale = fp8_encode(x, BLOCK_M, BLOCK_K, BR, BC, POW2, BYTEWISE)
        else:
            codes = tl.zeros((BLOCK_M, BLOCK_K), tl.uint8)
            scale = tl.full((BLOCK_M // BR, BLOCK_K // BC), 1.0, tl.float32)
    else:
        codes, scale = fp8_encode(x, BLOCK_M, BLOCK_K, BR, BC, POW2, BYTEWISE)
    return codes, scale


@triton.jit
def _copy_rows(row0, out_rows, local0, src_end, batch, batch_rows, GROUPED: tl.constexpr, ROWS: tl.constexpr):
    """(first row, end row) of the rows fp8_block_kernel stores of one copy of its tile (blocks
    ROWS high): the tile's rows of its matrix, or GROUPED the grouped layout's block at row0
    (ROWS > 1) or x's rows [local0, src_end) the tile holds (ROWS == 1)."""
    first = local0
    end = tl.minimum(out_rows - batch * batch_rows, batch_rows)
    if GROUPED:
        if ROWS == 1:
            end = src_end
        else:
            first = row0
            end = out_rows
    return first, end


# ---------------------------------------------------------------------------------------------
# Kernels


@triton.jit
def fp8_block_kernel(x_ptr, data_ptr, scale_ptr, n_rows, n_cols, x_stride_r, x_stride_c, batch_rows, x_stride_b,
                     out_rows, d_stride_b, d_stride_r, d_stride_c, s_stride_b, s_stride_r, s_stride_c,
                     data2_ptr, scale2_ptr, out2_rows, d2_stride_r, d2_stride_c, s2_stride_r, s2_stride_c,
                     rows_ptr, n_blocks,
                     BLOCK_ROWS: tl.constexpr, BLOCK_COLS: tl.constexpr, POW2: tl.constexpr, SECOND: tl.constexpr,
                     SECOND_ROWS: tl.constexpr, SECOND_COLS: tl.constexpr, BATCHED: tl.constexpr,
                     BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr, GROUPED: tl.constexpr):
    """FP8 block scaling, blocks of BLOCK_ROWS x BLOCK_COLS (1 x 128, 128 x 128, or 128 x 1:
    the column-wise copy of grouped_glu_mlp's weight gradients), outputs through strides.

    x_ptr: (n_rows, n_cols) float32/bfloat16/float16: row r is row r % batch_rows of matrix
    b = r // batch_rows, at x_ptr + b * x_stride_b (a batch of matrices, e.g. the experts of
    a weight; BATCHED; else batch_rows = out_rows and x_stride_b 0); element strides
    (x_stride_r, x_stride_c). batch_rows is a multiple of BLOCK_M, so a tile is in one matrix.
    data_ptr: uint8 (float8_e4m3fn bits), element (r, c) of matrix b at b * d_stride_b +
    r * d_stride_r + c * d_stride_c (d_stride_r 1 writes the transpose).
    scale_ptr: float32, block (i, j) of matrix b at b * s_stride_b + i * s_stride_r +
    j * s_stride_c.
    out_rows >= n_rows: rows [n_rows, out_rows) of one matrix are stored as zeros (padding to
    the block; batch_rows = out_rows then); a batch has out_rows = n_rows.
    SECOND: a second copy of the tile is stored at data2_ptr / scale2_ptr with the strides
    d2_* / s2_* (matrix strides d_stride_b / s_stride_b), quantized in blocks of SECOND_ROWS x
    SECOND_COLS, its rows [0, out2_rows) stored (out2_rows: n_rows, out_rows, or GROUPED the
    grouped layout's rows). The block
    shape of the first: the same codes and scales (grouped_glu_mlp writes a weight's forward
    copy and its transposed dgrad copy from one read). Another block shape: the tile's own
    codes and scales in those blocks (one matrix, not BATCHED: grouped_glu_mlp's row-wise 1 x 128
    copy of an activation and its column-wise 128 x 1 copy from one read). The tile holds whole
    blocks of both shapes.
    Grid (column tiles, Y, Z): program (j, y, z) quantizes rows [i*BLOCK_M, +BLOCK_M) x columns
    [j*BLOCK_K, +BLOCK_K), i = z * Y + y (Y at most 65535, CUDA's limit; a row tile i past the
    end is all masked out). Consecutive programs take consecutive column tiles of the same rows,
    so x is read in long contiguous runs (1-5% faster than row tiles first on the H200), and no
    program divides its id.

    GROUPED (one matrix, BLOCK_M == 128, a 128 x 1 copy): x's rows come in groups
    (grouped_glu_mlp's experts), and the 128 x 1 copy is laid out by group: each group's rows
    padded with zeros to a multiple of 128, end to end (group_rows), so no block mixes two
    groups' rows and each group's blocks start at its first row. Row tile i is that layout's
    block i: x's rows [rows_ptr[2 i], rows_ptr[2 i + 1]) (int32; the table group_table_kernel
    makes of the counts, n_blocks entries, a tile past them empty), stored at rows
    [128 i, 128 i + 128) of the 128 x 1 copy (out_rows: the layout's row
    count, blocks past the last group's all zeros, stored without the encoding's arithmetic);
    a 1 x 128 copy of the same tile is stored at x's own rows (grouped_glu_mlp's row-wise
    copy, from the same read).
    """
    tile_k = tl.program_id(0)
    tile_m = tl.program_id(2) * tl.num_programs(1) + tl.program_id(1)
    row0 = tile_m * BLOCK_M
    col0 = tile_k * BLOCK_K
    if BATCHED:
        batch = row0 // batch_rows
    else:
        batch = row0 * 0
    if GROUPED:   # the tile: x's rows [src0, src_end) from the launch's table, zeros after them
        in_table = tile_m < n_blocks
        src0 = tl.load(rows_ptr + 2 * tile_m, mask=in_table, other=0).to(tl.int64)
        src_end = tl.load(rows_ptr + 2 * tile_m + 1, mask=in_table, other=0).to(tl.int64)
        local0 = src0
        x = load_tile(x_ptr, src0, col0, src_end, n_cols, x_stride_r, x_stride_c, BLOCK_M, BLOCK_K)
    else:
        local0 = row0 - batch * batch_rows
        src_end = n_rows
        x = load_tile(x_ptr + batch.to(tl.int64) * x_stride_b, local0, col0,
                      tl.minimum(n_rows - batch * batch_rows, batch_rows), n_cols, x_stride_r, x_stride_c,
                      BLOCK_M, BLOCK_K)
    has_rows = src_end > local0   # GROUPED: a block past the last group's holds none
    codes, scale = _encode_tile(x, has_rows, BLOCK_M, BLOCK_K, BLOCK_ROWS, BLOCK_COLS, POW2, SECOND, GROUPED)
    first0, first_end = _copy_rows(row0, out_rows, local0, src_end, batch, batch_rows, GROUPED, BLOCK_ROWS)
    fp8_store(data_ptr + batch.to(tl.int64) * d_stride_b, scale_ptr + batch.to(tl.int64) * s_stride_b, codes, scale,
              first0, col0, first_end, n_cols, d_stride_r, d_stride_c, s_stride_r, s_stride_c,
              BLOCK_M, BLOCK_K, BLOCK_ROWS, BLOCK_COLS)
    if SECOND:
        if SECOND_ROWS != BLOCK_ROWS or SECOND_COLS != BLOCK_COLS:
            codes, scale = _encode_tile(x, has_rows, BLOCK_M, BLOCK_K, SECOND_ROWS, SECOND_COLS, POW2, SECOND,
                                        GROUPED)
        second0, second_end = _copy_rows(row0, out2_rows, local0, src_end, batch, batch_rows, GROUPED, SECOND_ROWS)
        fp8_store(data2_ptr + batch.to(tl.int64) * d_stride_b, scale2_ptr + batch.to(tl.int64) * s_stride_b, codes,
                  scale, second0, col0, second_end, n_cols, d2_stride_r, d2_stride_c, s2_stride_r, s2_stride_c,
                  BLOCK_M, BLOCK_K, SECOND_ROWS, SECOND_COLS)


@triton.jit
def mxfp8_kernel(x_ptr, data_ptr, scale_ptr, n_rows, n_cols, x_stride_r, x_stride_c, padded_cols,
                 SWIZZLE: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    """MXFP8: E4M3 data, one E8M0 scale per 32 elements along K.

    x_ptr: (n_rows, n_cols) float32/bfloat16/float16, strides (x_stride_r, x_stride_c).
    data_ptr: (n_rows, n_cols) uint8 (float8_e4m3fn bits), contiguous.
    scale_ptr: uint8 biased exponents, (n_rows, n_cols // 32) row-major, or with SWIZZLE the
        flat 128x4 layout of that matrix padded to padded_cols columns (zeros pre-filled).
    """
    row0, col0 = tile_origin(BLOCK_M, BLOCK_K)
    x = load_tile(x_ptr, row0, col0, n_rows, n_cols, x_stride_r, x_stride_c, BLOCK_M, BLOCK_K)
    amax = block_amax(x, BLOCK_M, BLOCK_K, 1, 32)
    e = e8m0_bits(tl.math.div_rn(amax, tl.full(amax.shape, _E4M3_MAX, tl.float32)))
    v = x * expand_blocks(e8m0_reciprocal(e), BLOCK_M, BLOCK_K, 1, 32)
    _store_tile(data_ptr, e4m3_codes(v), row0, col0, n_rows, n_cols, n_cols, 1, BLOCK_M, BLOCK_K)
    store_scales(scale_ptr, e.to(tl.uint8), row0, col0 // 32, n_rows, n_cols // 32, n_cols // 32, 1, padded_cols,
                 BLOCK_M, BLOCK_K // 32, SWIZZLE)


@triton.jit
def amax_partial_kernel(x_ptr, partial_ptr, n_rows, n_cols, x_stride_r, x_stride_c,
                        RHT: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    """partial_ptr[program] = amax(|tile|) (float32; +inf if the tile holds a NaN or +-inf), of
    the Hadamard-transformed tile with RHT. Grid launch.rows_cols_grid's, its programs flattened
    row-major (a program past the last column tile stores 0)."""
    row0, col0 = tile_origin(BLOCK_M, BLOCK_K)
    x = load_tile(x_ptr, row0, col0, n_rows, n_cols, x_stride_r, x_stride_c, BLOCK_M, BLOCK_K)
    if RHT:
        x = rht16(x, BLOCK_M, BLOCK_K)
    a = tl.abs(x)
    a = tl.where(a <= _FP32_MAX, a, _INF)
    per_row = tl.num_programs(1) * tl.num_programs(2)
    program = tl.program_id(0).to(tl.int64) * per_row + tl.program_id(2) * tl.num_programs(1) + tl.program_id(1)
    tl.store(partial_ptr + program, tl.max(tl.max(a, axis=1), axis=0))


@triton.jit
def amax_finalize_kernel(partial_ptr, amax_ptr, n_partials, BLOCK: tl.constexpr):
    """amax_ptr[b] = max(partial_ptr[b * n_partials:][:n_partials]), NaN if that is +inf;
    program b of a grid of one program per amax."""
    b = tl.program_id(0)
    segment = partial_ptr + b.to(tl.int64) * n_partials
    m = tl.zeros((BLOCK,), tl.float32)
    for start in range(0, n_partials, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        m = tl.maximum(m, tl.load(segment + offs, mask=offs < n_partials, other=0.0))
    total = tl.max(m, axis=0, keep_dims=True)
    tl.store(amax_ptr + b + tl.arange(0, 1), nan_where(total == _INF, total))


@triton.jit
def nvfp4_kernel(x_ptr, amax_ptr, rand_ptr, data_ptr, scale_ptr, n_rows, n_cols,
                 x_stride_r, x_stride_c, rand_stride_r, rand_stride_c, padded_cols,
                 batch_rows, x_stride_b, batch_scale_rows,
                 BLOCK_ROWS: tl.constexpr, RHT: tl.constexpr, STOCHASTIC: tl.constexpr,
                 SWIZZLE: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    """NVFP4: packed E2M1 data, E4M3 scales per BLOCK_ROWS x 16 elements (BLOCK_ROWS 1, or 16
    for 2-D blocks), the fp32 per-tensor scale from amax_ptr.

    x_ptr: (n_rows, n_cols) float32/bfloat16/float16, strides (x_stride_r, x_stride_c).
    amax_ptr: float32 scalar, the per-tensor amax (of the transformed x with RHT).
    rand_ptr: (n_rows, n_cols) int32 random bits (read as uint32) with STOCHASTIC, strides
        (rand_stride_r, rand_stride_c); unused otherwise.
    data_ptr: (n_rows, n_cols // 2) uint8, element 2i in the low nibble, contiguous.
    scale_ptr: uint8 (float8_e4m3fn bits): (cdiv(n_rows, BLOCK_ROWS), n_cols // 16) row-major;
        with SWIZZLE the flat 128x4 layout of the
        (n_rows, n_cols // 16) matrix (a 2-D block's scale repeated on its 16 rows), padded to
        padded_cols columns (zeros pre-filled).
    A batch of matrices (grouped_glu_mlp's nvfp4 weights, one amax per expert): row r is row
    r % batch_rows of matrix b = r // batch_rows at x_ptr + b * x_stride_b, with amax
    amax_ptr[b]; data rows stay the flattened rows; with SWIZZLE matrix b's scale rows start at
    row b * batch_scale_rows of the swizzled buffer (its rows padded to a multiple of 128).
    batch_rows is a multiple of BLOCK_M and of BLOCK_ROWS. One matrix: batch_rows >= n_rows,
    x_stride_b and batch_scale_rows 0.
    """
    row0, col0 = tile_origin(BLOCK_M, BLOCK_K)
    batch = row0 // batch_rows
    local0 = row0 - batch * batch_rows
    batch_n_rows = tl.minimum(n_rows - batch * batch_rows, batch_rows)
    x = load_tile(x_ptr + batch.to(tl.int64) * x_stride_b, local0, col0, batch_n_rows, n_cols, x_stride_r,
                  x_stride_c, BLOCK_M, BLOCK_K)
    if RHT:
        x = rht16(x, BLOCK_M, BLOCK_K)
    amax = tl.load(amax_ptr + batch + tl.arange(0, 1))     # shape (1,): broadcasts like a scalar
    s_enc = tl.where(amax == 0.0, 1.0,
                     _min_nan(tl.math.div_rn(tl.full((1,), _NVFP4_GLOBAL, tl.float32), amax), _FP32_MAX))
    s_dec = tl.math.div_rn(tl.full((1,), 1.0, tl.float32), s_enc)
    blk = block_amax(x, BLOCK_M, BLOCK_K, BLOCK_ROWS, 16)
    s_bits = e4m3_bits(_clamp_nan(blk * (s_enc * _ONE_SIXTH), -_E4M3_MAX, _E4M3_MAX))
    s_val = e4m3_value(s_bits)
    enc = _min_nan(tl.math.div_rn(tl.full(s_val.shape, 1.0, tl.float32), s_val * s_dec), _FP32_MAX)
    v = _clamp_nan(x * expand_blocks(enc, BLOCK_M, BLOCK_K, BLOCK_ROWS, 16), -_E2M1_MAX, _E2M1_MAX)
    if STOCHASTIC:
        rows = (row0 + tl.arange(0, BLOCK_M)).to(tl.int64)
        cols = (col0 + tl.arange(0, BLOCK_K)).to(tl.int64)
        mask = (rows < n_rows)[:, None] & (cols < n_cols)[None, :]
        rand = tl.load(rand_ptr + rows[:, None] * rand_stride_r + cols[None, :] * rand_stride_c,
                       mask=mask, other=0).to(tl.uint32, bitcast=True)
        codes = e2m1_codes_stochastic(v, x, rand)
    else:
        codes = e2m1_codes(v, x)
    lo, hi = tl.split(tl.reshape(codes, (BLOCK_M, BLOCK_K // 2, 2)))
    _store_tile(data_ptr, (lo | (hi << 4)).to(tl.uint8), row0, col0 // 2, n_rows, n_cols // 2, n_cols // 2, 1,
                BLOCK_M, BLOCK_K // 2)
    srow0 = batch * batch_scale_rows + local0            # swizzled scale rows: one per data row
    srow_end = batch * batch_scale_rows + batch_n_rows
    if SWIZZLE:   # one scale row per data row: a 16x16 block's scale repeated on its 16 rows
        per_row = expand_blocks(s_bits, BLOCK_M, BLOCK_K // 16, BLOCK_ROWS, 1)
        store_scales(scale_ptr, per_row.to(tl.uint8), srow0, col0 // 16, srow_end, n_cols // 16, n_cols // 16, 1,
                     padded_cols, BLOCK_M, BLOCK_K // 16, True)
    else:
        store_scales(scale_ptr, s_bits.to(tl.uint8), row0 // BLOCK_ROWS, col0 // 16,
                     (n_rows + BLOCK_ROWS - 1) // BLOCK_ROWS, n_cols // 16, n_cols // 16, 1, padded_cols,
                     BLOCK_M // BLOCK_ROWS, BLOCK_K // 16, False)
