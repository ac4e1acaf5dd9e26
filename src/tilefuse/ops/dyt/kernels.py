"""Triton kernels for DyT. Only ``@triton.jit`` code lives here; launch.py sizes and launches.

Layout: every kernel sees ``x`` as a contiguous (n_rows, n_cols) matrix.
- channels-last: n_cols = C, a column's parameter is ``weight[col]`` (PARAM_PER_ROW=False);
- channels-first (N, C, S): n_rows = N*C, n_cols = S, a row's parameter is
  ``weight[row % C]`` (PARAM_PER_ROW=True), so no transpose copy is needed.

All arithmetic is float32. Offsets are int64 (tensors above 2**31 elements work). In the
backward, padded lanes are masked after the arithmetic, not only at the loads: with alpha = inf
a padded zero gives alpha * x = inf * 0 = NaN, and with an infinite weight a padded dy = 0
gives g = dy * w * (1 - t^2) = 0 * inf = NaN (a partial row tile's padded rows hold their
columns' weights; a channels-first row's padded columns hold that row's weight); either would
reach the parameter gradients. The kernels zero ``u = alpha * x`` and ``g`` on padded lanes
(two selects per element, both in _bwd_tile, which every backward kernel runs); with
x = dy = 0 loaded there, every term a padded lane adds (dy*t, x*g, dy) is then exactly 0.
"""

import triton
import triton.language as tl

from ..triton_common import INTERPRETER as _INTERPRETER
from ..triton_common import to_output

# Compiled kernels use the flush-to-zero exp2/reciprocal instructions (inline PTX, which the
# interpreter cannot run); under the interpreter (CPU tests) tanh_f32 uses tl.exp2 and a
# division. They differ only for subnormal arguments, which tanh_f32 never feeds them (see
# there), and by < 1 ulp otherwise. Output conversions go through triton_common.to_output.

# Odd polynomial for tanh on |u| < 0.75: tanh(u) ~ u + u^3 * P(u^2), five coefficients. Fitted
# by iteratively reweighted least squares against float64 tanh; max error 1.19 ulp (1.74 u32
# relative) in float32 Horner (FMA) evaluation, checked at 7e6 arguments. The exp form takes over
# at |u| = 0.75: there the error of the approximate ex2 / rcp instructions reaches t scaled by
# tanh's sensitivity to r = 1 / (exp(2|u|) + 1), 2r / t <= 0.58 for |u| >= 0.75. The split sits
# at 0.75 because a polynomial up to 1 needs seven coefficients for the same accuracy: two FMAs
# an element more, about 7% of the 16-bit forward's instructions, which is issue-bound
# (results/2026-12-01-h200-i run 1).
_TANH_SMALL = tl.constexpr(0.75)
_TWO_LOG2E = tl.constexpr(2.8853900817779268)
_P0 = tl.constexpr(-0.3333306908607483)
_P1 = tl.constexpr(0.13326525688171387)
_P2 = tl.constexpr(-0.05339052155613899)
_P3 = tl.constexpr(0.01966552622616291)
_P4 = tl.constexpr(-0.0047699767164886)


@triton.jit
def _exp2_ftz(v):
    if _INTERPRETER:
        return tl.exp2(v)
    else:
        return tl.inline_asm_elementwise("ex2.approx.ftz.f32 $0, $1;", "=r,r", [v],
                                         dtype=tl.float32, is_pure=True, pack=1)


@triton.jit
def _rcp_ftz(v):
    if _INTERPRETER:
        return 1.0 / v
    else:
        return tl.inline_asm_elementwise("rcp.approx.ftz.f32 $0, $1;", "=r,r", [v],
                                         dtype=tl.float32, is_pure=True, pack=1)


@triton.jit
def tanh_f32(u):
    """float32 tanh within ~3 ulp, built from core ops so Triton's interpreter runs it too
    (libdevice has no interpreter implementation). tanh(+-inf) = +-1, tanh(NaN) = NaN.

    |u| >= 0.75 uses sign(u) (1 - 2 / (exp(2|u|) + 1)); exp(2|u|) -> inf gives +-1 exactly. The
    form on |u| matters: for u <= -1 the quotient 2 / (exp(2u) + 1) is close to 2 and carries
    twice the reciprocal's error into a result near -1 (3.6 ulp measured on the H200); on
    |u| the quotient r is <= 0.37 and its error shrinks relative to the result: with ex2
    within 2 ulp and rcp within 1, as PTX documents them, r is within 6.3 u32 relative and t
    within 0.58 * 6.3 + 1 = 4.6 u32 at |u| = 0.75, less above (<= 3 ulp).
    Below 0.75 that form loses accuracy, so an odd polynomial takes over. exp2 and the
    reciprocal use the flush-to-zero hardware instructions (no subnormal fix-up code): their
    arguments are never subnormal where their result is selected (|2u log2 e| >= 2.16, and
    e + 1 >= 1).
    """
    s = u * u
    p = _P4
    p = p * s + _P3
    p = p * s + _P2
    p = p * s + _P1
    p = p * s + _P0
    small = u + u * s * p
    big = 1.0 - 2.0 * _rcp_ftz(_exp2_ftz(tl.abs(u) * _TWO_LOG2E) + 1.0)
    big = tl.where(u < 0, -big, big)
    return tl.where(s < _TANH_SMALL * _TANH_SMALL, small, big)


@triton.jit
def _load_params(weight_ptr, bias_ptr, rows, row_mask, cols, col_mask, n_channels,
                 HAS_BIAS: tl.constexpr, PARAM_PER_ROW: tl.constexpr):
    """weight (and bias) for a tile, shaped to broadcast over (BLOCK_M, BLOCK_N), float32.
    Loaded through 2-D pointers so they arrive in the tile's layout (no shared-memory
    layout conversion)."""
    if PARAM_PER_ROW:
        channel = (rows % n_channels)[:, None]
        pmask = row_mask[:, None]
    else:
        channel = cols[None, :]
        pmask = col_mask[None, :]
    w = tl.load(weight_ptr + channel, mask=pmask, other=0.0).to(tl.float32)
    if HAS_BIAS:
        b = tl.load(bias_ptr + channel, mask=pmask, other=0.0).to(tl.float32)
    else:
        b = w
    return w, b


@triton.jit
def dyt_fwd_kernel(
    x_ptr, y_ptr, alpha_ptr, weight_ptr, bias_ptr,
    n_rows, n_cols, n_channels,
    HAS_BIAS: tl.constexpr, PARAM_PER_ROW: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):
    """y = weight * tanh(alpha * x) + bias for one BLOCK_M x BLOCK_N tile.

    x_ptr, y_ptr: (n_rows, n_cols) contiguous, x dtype (fp32/bf16/fp16).
    alpha_ptr: one element, any float dtype. weight_ptr, bias_ptr: (n_channels,), any float
    dtype; bias_ptr is unused without HAS_BIAS.
    Grid: 1-D, cdiv(n_rows, BLOCK_M) * cdiv(n_cols, BLOCK_N) programs; program ``pid`` owns
    row block ``pid // n_col_blocks`` and column block ``pid % n_col_blocks``.
    """
    pid = tl.program_id(0)
    n_col_blocks = tl.cdiv(n_cols, BLOCK_N)
    row_block = pid // n_col_blocks
    col_block = pid % n_col_blocks
    rows = row_block.to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = col_block * BLOCK_N + tl.arange(0, BLOCK_N)
    row_mask = rows < n_rows
    col_mask = cols < n_cols
    mask = row_mask[:, None] & col_mask[None, :]
    offsets = rows[:, None] * n_cols + cols[None, :]

    alpha = tl.load(alpha_ptr).to(tl.float32)
    w, b = _load_params(weight_ptr, bias_ptr, rows, row_mask, cols, col_mask, n_channels,
                        HAS_BIAS, PARAM_PER_ROW)
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    tl.store(y_ptr + offsets, _fwd_tile(x, alpha, w, b, y_ptr, HAS_BIAS), mask=mask)


@triton.jit
def _fwd_tile(x, alpha, w, b, y_ptr, HAS_BIAS: tl.constexpr):
    """y = w * tanh(alpha * x) (+ b) for a loaded tile of x, in y_ptr's element type."""
    y = w * tanh_f32(alpha * x.to(tl.float32))
    if HAS_BIAS:
        y = y + b
    return to_output(y, y_ptr)


@triton.jit
def _column_block_of(pid, n_cols, BLOCK_N: tl.constexpr):
    """A persistent program's place: its row group ``pid // n_col_blocks`` and the columns of
    its column block ``pid % n_col_blocks``, with their mask."""
    n_col_blocks = tl.cdiv(n_cols, BLOCK_N)
    cols = (pid % n_col_blocks) * BLOCK_N + tl.arange(0, BLOCK_N)
    return pid // n_col_blocks, cols, cols < n_cols


@triton.jit
def dyt_fwd_persistent_kernel(
    x_ptr, y_ptr, alpha_ptr, weight_ptr, bias_ptr,
    n_rows, n_cols, n_channels, n_groups,
    HAS_BIAS: tl.constexpr, PARAM_PER_ROW: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):
    """The forward as persistent programs that prefetch: dyt_fwd_kernel's arithmetic on the
    same tiles (y bitwise the same), the loop of dyt_bwd_cols_kernel's PREFETCH.

    Arguments as dyt_fwd_kernel's, plus n_groups. Grid: n_groups * n_col_blocks programs;
    program ``pid`` owns column block ``pid % n_col_blocks`` and visits row blocks ``g, g +
    n_groups, ...`` (``g = pid // n_col_blocks``), loading the next row block's x before the
    current block's arithmetic, so two tiles' loads are in flight per program.
    """
    pid = tl.program_id(0)
    group, cols, col_mask = _column_block_of(pid, n_cols, BLOCK_N)
    alpha = tl.load(alpha_ptr).to(tl.float32)
    # In-tile offsets once (int32); the tile's first row (int64) steps by n_groups * BLOCK_M
    # rows (n_groups may arrive as the constant 1: only group, a tensor, is widened).
    tile = tl.arange(0, BLOCK_M)[:, None] * n_cols + cols[None, :]
    first = group.to(tl.int64) * BLOCK_M
    rows = first + tl.arange(0, BLOCK_M)
    row_mask = rows < n_rows
    w, b = _load_params(weight_ptr, bias_ptr, rows, row_mask, cols, col_mask, n_channels,
                        HAS_BIAS, PARAM_PER_ROW)
    x = tl.load(x_ptr + first * n_cols + tile, mask=row_mask[:, None] & col_mask[None, :], other=0.0)
    for i in range(0, tl.cdiv(tl.cdiv(n_rows, BLOCK_M) - group, n_groups)):
        next_first = first + n_groups * BLOCK_M
        next_rows = next_first + tl.arange(0, BLOCK_M)
        next_row_mask = next_rows < n_rows
        next_x = tl.load(x_ptr + next_first * n_cols + tile, mask=next_row_mask[:, None] & col_mask[None, :],
                         other=0.0)
        if PARAM_PER_ROW:     # a row's parameter; channels-last: the columns', loaded once above
            w, b = _load_params(weight_ptr, bias_ptr, rows, row_mask, cols, col_mask, n_channels,
                                HAS_BIAS, PARAM_PER_ROW)
        tl.store(y_ptr + first * n_cols + tile, _fwd_tile(x, alpha, w, b, y_ptr, HAS_BIAS),
                 mask=row_mask[:, None] & col_mask[None, :])
        x, first, rows, row_mask = next_x, next_first, next_rows, next_row_mask


@triton.jit
def _dalpha_acc(x_ptr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """dalpha's zero accumulator for BLOCK_M x BLOCK_N tiles of x: a column per 16 bytes of a
    row, at least one (_bwd_tile sums each thread's runs into it)."""
    RUN: tl.constexpr = 128 // x_ptr.dtype.element_ty.primitive_bitwidth
    return tl.zeros((BLOCK_M, (BLOCK_N + RUN - 1) // RUN), dtype=tl.float32)


@triton.jit
def _bwd_tile(x, dy, mask, alpha, w, dx_ptrs, dweight_acc, dbias_acc, dalpha_acc, HAS_BIAS: tl.constexpr):
    """One tile of the backward: stores dx = alpha dy w (1 - t^2) and returns the float32
    accumulators with this tile's dy*t, x*g (and dy) added. x, dy: the tile as loaded (x's
    dtype, 0 on masked lanes); w broadcasts over the tile."""
    x = x.to(tl.float32)
    dy = dy.to(tl.float32)
    t = tanh_f32(tl.where(mask, alpha * x, 0.0))
    g = tl.where(mask, dy * w * (1.0 - t * t), 0.0)   # 0 * inf on padded lanes (module docstring)
    tl.store(dx_ptrs, to_output(alpha * g, dx_ptrs), mask=mask)
    dweight_acc += dy * t
    # dalpha only needs a total: each thread first sums its own 16-byte runs of a row (the
    # reshape and the sum stay in registers), so its accumulator (_dalpha_acc) is 4-8x smaller
    # than the tile. A third tile-sized accumulator beside dweight's and dbias's made the
    # 16-warp 8192-element tiles spill (up to 200 bytes of stack on triton 3.6; 0-56 this way).
    dalpha_acc += tl.sum(tl.reshape(x * g, dalpha_acc.shape + (x.shape[1] // dalpha_acc.shape[1],)), axis=2)
    if HAS_BIAS:
        dbias_acc += dy
    return dweight_acc, dbias_acc, dalpha_acc


@triton.jit
def dyt_bwd_cols_kernel(
    dy_ptr, x_ptr, dx_ptr, alpha_ptr, weight_ptr,
    dweight_part_ptr, dbias_part_ptr, dalpha_part_ptr,
    n_rows, n_cols, n_groups,
    HAS_BIAS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    PREFETCH: tl.constexpr,
):
    """Channels-last backward, persistent: dx, plus partial parameter sums per program.

    dy_ptr, x_ptr, dx_ptr: (n_rows, n_cols) contiguous, x dtype.
    alpha_ptr: one element; weight_ptr: (n_cols,).
    dweight_part_ptr, dbias_part_ptr: (n_groups, n_cols) float32, each element written once
    (dbias only with HAS_BIAS). dalpha_part_ptr: (n_groups * n_col_blocks,) float32.
    Grid: n_groups * n_col_blocks programs. Program ``pid`` owns column block
    ``pid % n_col_blocks`` and visits row blocks ``g, g + n_groups, ...`` with
    ``g = pid // n_col_blocks``, accumulating BLOCK_M x BLOCK_N float32 tiles (dweight, dbias;
    dalpha a column per 16 bytes of x, _bwd_tile) that it reduces once at the end. The order of
    every sum is fixed by the config: bitwise reproducible.

    PREFETCH: each iteration first loads the next row block's x and dy (masked off past the
    last row), then does the current block's arithmetic, so two row blocks' loads are in
    flight per program instead of one. The arithmetic and its order are the same: the result
    is bitwise that of PREFETCH=False with the same tile. It pays where a program's own
    arithmetic would otherwise leave the loads unissued (16-bit x, results/2026-12-01-h200-i).
    """
    pid = tl.program_id(0)
    group, cols, col_mask = _column_block_of(pid, n_cols, BLOCK_N)

    alpha = tl.load(alpha_ptr).to(tl.float32)
    w = tl.load(weight_ptr + cols[None, :], mask=col_mask[None, :], other=0.0).to(tl.float32)
    dweight_acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    dbias_acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    dalpha_acc = _dalpha_acc(x_ptr, BLOCK_M, BLOCK_N)

    n_row_blocks = tl.cdiv(n_rows, BLOCK_M)
    n_iter = tl.cdiv(n_row_blocks - group, n_groups)
    if PREFETCH:
        # In-tile offsets once (int32: a tile spans fewer than 2**31 elements); the tile's
        # first row (int64) steps by n_groups * BLOCK_M rows. n_groups may arrive as the
        # constant 1 (Triton specializes it), so only group, a tensor, is widened.
        tile = tl.arange(0, BLOCK_M)[:, None] * n_cols + cols[None, :]
        first = group.to(tl.int64) * BLOCK_M
        rows = first + tl.arange(0, BLOCK_M)
        mask = (rows < n_rows)[:, None] & col_mask[None, :]
        x = tl.load(x_ptr + first * n_cols + tile, mask=mask, other=0.0)
        dy = tl.load(dy_ptr + first * n_cols + tile, mask=mask, other=0.0)
        for i in range(0, n_iter):
            next_first = first + n_groups * BLOCK_M
            next_mask = ((next_first + tl.arange(0, BLOCK_M)) < n_rows)[:, None] & col_mask[None, :]
            next_x = tl.load(x_ptr + next_first * n_cols + tile, mask=next_mask, other=0.0)
            next_dy = tl.load(dy_ptr + next_first * n_cols + tile, mask=next_mask, other=0.0)
            dweight_acc, dbias_acc, dalpha_acc = _bwd_tile(
                x, dy, mask, alpha, w, dx_ptr + first * n_cols + tile, dweight_acc, dbias_acc, dalpha_acc,
                HAS_BIAS)
            x, dy, mask, first = next_x, next_dy, next_mask, next_first
    else:
        for i in range(0, n_iter):
            row_block = group.to(tl.int64) + i * n_groups
            rows = row_block * BLOCK_M + tl.arange(0, BLOCK_M)
            mask = (rows < n_rows)[:, None] & col_mask[None, :]
            offsets = rows[:, None] * n_cols + cols[None, :]
            x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
            dy = tl.load(dy_ptr + offsets, mask=mask, other=0.0)
            dweight_acc, dbias_acc, dalpha_acc = _bwd_tile(
                x, dy, mask, alpha, w, dx_ptr + offsets, dweight_acc, dbias_acc, dalpha_acc, HAS_BIAS)

    part = group.to(tl.int64) * n_cols + cols
    tl.store(dweight_part_ptr + part, tl.sum(dweight_acc, axis=0), mask=col_mask)
    if HAS_BIAS:
        tl.store(dbias_part_ptr + part, tl.sum(dbias_acc, axis=0), mask=col_mask)
    tl.store(dalpha_part_ptr + pid, tl.sum(tl.sum(dalpha_acc, axis=1), axis=0))


@triton.jit
def dyt_bwd_rows_kernel(
    dy_ptr, x_ptr, dx_ptr, alpha_ptr, weight_ptr,
    dweight_rows_ptr, dbias_rows_ptr, dalpha_part_ptr,
    n_rows, n_cols, n_channels, n_groups,
    HAS_BIAS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):
    """Channels-first backward, persistent: dx, plus per-row sums and per-program dalpha.

    dy_ptr, x_ptr, dx_ptr: (n_rows, n_cols) = (N*C, S) contiguous, x dtype.
    alpha_ptr: one element; weight_ptr: (n_channels,), row r uses weight[r % n_channels].
    dweight_rows_ptr, dbias_rows_ptr: (n_rows,) float32, the sum over a row's S elements of
    dy*t (and dy), each written once; viewed as (N, C) they are the second stage's partials.
    dalpha_part_ptr: (n_groups,) float32.
    Grid: n_groups programs; program ``g`` visits row blocks ``g, g + n_groups, ...`` and
    walks each row block's columns in BLOCK_N steps.
    """
    group = tl.program_id(0)
    alpha = tl.load(alpha_ptr).to(tl.float32)
    dalpha_acc = _dalpha_acc(x_ptr, BLOCK_M, BLOCK_N)
    n_row_blocks = tl.cdiv(n_rows, BLOCK_M)
    for i in range(0, tl.cdiv(n_row_blocks - group, n_groups)):
        row_block = group.to(tl.int64) + i * n_groups
        rows = row_block * BLOCK_M + tl.arange(0, BLOCK_M)
        row_mask = rows < n_rows
        w = tl.load(weight_ptr + (rows % n_channels)[:, None], mask=row_mask[:, None], other=0.0).to(tl.float32)
        dweight_acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        dbias_acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for col_start in range(0, n_cols, BLOCK_N):
            cols = col_start + tl.arange(0, BLOCK_N)
            mask = row_mask[:, None] & (cols < n_cols)[None, :]
            offsets = rows[:, None] * n_cols + cols[None, :]
            x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
            dy = tl.load(dy_ptr + offsets, mask=mask, other=0.0)
            dweight_acc, dbias_acc, dalpha_acc = _bwd_tile(
                x, dy, mask, alpha, w, dx_ptr + offsets, dweight_acc, dbias_acc, dalpha_acc, HAS_BIAS)
        tl.store(dweight_rows_ptr + rows, tl.sum(dweight_acc, axis=1), mask=row_mask)
        if HAS_BIAS:
            tl.store(dbias_rows_ptr + rows, tl.sum(dbias_acc, axis=1), mask=row_mask)
    tl.store(dalpha_part_ptr + group, tl.sum(tl.sum(dalpha_acc, axis=1), axis=0))


@triton.jit
def dyt_bwd_reduce_kernel(
    dweight_part_ptr, dbias_part_ptr, dalpha_part_ptr,
    dweight_ptr, dbias_ptr, dalpha_ptr,
    n_parts, n_cols, n_dalpha_parts,
    HAS_BIAS: tl.constexpr, BLOCK_P: tl.constexpr, BLOCK_N: tl.constexpr,
):
    """Second stage: deterministic sums of the partials, cast to each parameter's dtype.

    dweight_part_ptr, dbias_part_ptr: (n_parts, n_cols) float32. dalpha_part_ptr:
    (n_dalpha_parts,) float32. dweight_ptr, dbias_ptr: (n_cols,) in their parameters' dtypes;
    dalpha_ptr: one element in alpha's dtype.
    Grid: cdiv(n_cols, BLOCK_N) programs, each summing its columns over all parts in a fixed
    order; program 0 also sums the dalpha partials.
    """
    pid = tl.program_id(0)
    cols = pid * BLOCK_N + tl.arange(0, BLOCK_N)
    col_mask = cols < n_cols
    dweight_acc = tl.zeros((BLOCK_P, BLOCK_N), dtype=tl.float32)
    dbias_acc = tl.zeros((BLOCK_P, BLOCK_N), dtype=tl.float32)
    for part_start in range(0, n_parts, BLOCK_P):
        parts = part_start + tl.arange(0, BLOCK_P)
        mask = (parts < n_parts)[:, None] & col_mask[None, :]
        offsets = parts.to(tl.int64)[:, None] * n_cols + cols[None, :]
        dweight_acc += tl.load(dweight_part_ptr + offsets, mask=mask, other=0.0)
        if HAS_BIAS:
            dbias_acc += tl.load(dbias_part_ptr + offsets, mask=mask, other=0.0)
    tl.store(dweight_ptr + cols, to_output(tl.sum(dweight_acc, axis=0), dweight_ptr),
             mask=col_mask)
    if HAS_BIAS:
        tl.store(dbias_ptr + cols, to_output(tl.sum(dbias_acc, axis=0), dbias_ptr),
                 mask=col_mask)
    if pid == 0:
        dalpha_acc = tl.zeros((BLOCK_P,), dtype=tl.float32)
        for part_start in range(0, n_dalpha_parts, BLOCK_P):
            parts = part_start + tl.arange(0, BLOCK_P)
            dalpha_acc += tl.load(dalpha_part_ptr + parts, mask=parts < n_dalpha_parts, other=0.0)
        tl.store(dalpha_ptr, to_output(tl.sum(dalpha_acc, axis=0), dalpha_ptr))
