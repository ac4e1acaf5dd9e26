"""Triton kernels for grouped_glu_mlp: one grouped-GEMM template with epilogues, a ragged-K
weight-gradient GEMM and a ragged column sum. Only ``@triton.jit`` code; launch.py launches.

Rows are tokens permuted by expert: expert e owns rows [o_e, o_e + m_e) with
m_e = tokens_per_expert[e] read *on the device*; o_e is its prefix sum. A row tile is BLOCK_M
rows of one expert; the row tiles of all experts are numbered consecutively (expert 0's first)
and there are at most cdiv(T, BLOCK_M) + E of them, a bound known on the host without reading
the counts. Programs are persistent: program p handles tiles p, p + P, ... of the
(row tile x column tile) space and skips tile numbers beyond the last expert's tiles.
Rows at or beyond T are masked, so a bad split cannot read or write out of bounds (launch.py
also asserts sum(m_e) == T on the device).

GLU column order (specs/grouped_glu_mlp.md): activation column j reads FC1 output columns
gate g(j) = 2s floor(j/s) + j mod s and up u(j) = g(j) + s for interleave s; halves (gate j,
up F + j) when INTERLEAVE == 0.
"""

import triton
import triton.language as tl

from ..triton_common import dot_f32acc, to_output

EPI_STORE = tl.constexpr(0)   # C = A @ B (+ probs * bias)
EPI_GLU = tl.constexpr(1)     # z = A @ B (gate and up), h = p * act(z)
EPI_DGLU = tl.constexpr(2)    # dh = A @ B; dz from z, p; per-tile dprob partials

SWIGLU = tl.constexpr(0)
GEGLU = tl.constexpr(1)
GEGLU_LIMIT = tl.constexpr(7.0)


@triton.jit
def _sigmoid(x):
    return 1.0 / (1.0 + tl.exp(-x))


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
def glu_act(zg, zu, ACT: tl.constexpr):
    """a = silu(zg) * zu (SWIGLU) or the clamped quick-gelu GEGLU of the spec, float32."""
    if ACT == SWIGLU:
        return zg * _sigmoid(zg) * zu
    else:
        g = tl.minimum(zg, GEGLU_LIMIT)
        u = tl.minimum(tl.maximum(zu, -GEGLU_LIMIT), GEGLU_LIMIT)
        return (u + 1.0) * (g * _sigmoid(1.702 * g))


@triton.jit
def glu_act_grad(zg, zu, da, ACT: tl.constexpr):
    """(dzg, dzu) given da = dL/da, float32. At the clamp bounds the gradient passes, as
    torch.clamp's backward (and the reference) has it."""
    if ACT == SWIGLU:
        sg = _sigmoid(zg)
        dzu = da * zg * sg
        dzg = da * zu * sg * (1.0 + zg * (1.0 - sg))
    else:
        g = tl.minimum(zg, GEGLU_LIMIT)
        u = tl.minimum(tl.maximum(zu, -GEGLU_LIMIT), GEGLU_LIMIT)
        sg = _sigmoid(1.702 * g)
        dzu = tl.where((zu >= -GEGLU_LIMIT) & (zu <= GEGLU_LIMIT), da * g * sg, 0.0)
        dg = da * (u + 1.0) * sg * (1.0 + 1.702 * g * (1.0 - sg))
        dzg = tl.where(zg <= GEGLU_LIMIT, dg, 0.0)
    return dzg, dzu


@triton.jit
def find_tile(tile, counts_ptr, E, BLOCK_M: tl.constexpr):
    """(expert, first row, end row) of row tile number ``tile``; expert == E past the last tile.
    Scans the device-side counts in order (O(E) scalar loads, cached)."""
    expert = E
    row_start = 0
    row_end = 0
    tiles_before = 0
    rows_before = 0
    for e in range(0, E):
        m = tl.load(counts_ptr + e).to(tl.int32)
        n_tiles = tl.cdiv(m, BLOCK_M)
        hit = (tile >= tiles_before) & (tile < tiles_before + n_tiles) & (expert == E)
        expert = tl.where(hit, e, expert)
        row_start = tl.where(hit, rows_before + (tile - tiles_before) * BLOCK_M, row_start)
        row_end = tl.where(hit, rows_before + m, row_end)
        tiles_before += n_tiles
        rows_before += m
    return expert, row_start, row_end


@triton.jit
def grouped_gemm_kernel(
    a_ptr, b_ptr, c_ptr, counts_ptr, probs_ptr, bias_ptr, z_ptr, part_ptr,
    T, K, N, E, F, n_row_tiles_bound,
    lda, b_e_stride, b_k_stride, b_n_stride, ldc, ldz, bias_e_stride, n_part_cols,
    EPILOGUE: tl.constexpr, ACT: tl.constexpr, INTERLEAVE: tl.constexpr, HAS_BIAS: tl.constexpr,
    IEEE: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    """Grouped GEMM C[rows of e] = A[rows of e] @ B_e with an epilogue, persistent.

    a_ptr: (T, K) row stride lda. B_e element (k, n) at b_ptr + e*b_e_stride + k*b_k_stride
    + n*b_n_stride (natural weight layouts; the strides say which of them is transposed).
    N counts output columns: FC1 activation columns (F) for EPI_GLU, and for EPI_DGLU too.
    - EPI_STORE: c (T, N) row stride ldc = acc (+ probs[t] * bias[e, n] with HAS_BIAS).
    - EPI_GLU: B's columns gate g(j) and up u(j) are two dots; z_ptr (T, 2F) row stride ldz
      receives z at g(j), u(j) (+ fc1 bias[e, .] with HAS_BIAS); c (T, F) = h = p * act(z).
    - EPI_DGLU: acc = dh (A = dy, B = W2_e); z_ptr holds the saved z; c_ptr (T, 2F) receives
      dz at g(j), u(j); part_ptr (T, n_part_cols) float32 receives sum_j dh * act(z) per column
      tile (the dprob partials, each written once: no atomics).
    """
    pid = tl.program_id(0)
    n_programs = tl.num_programs(0)
    n_col_tiles = tl.cdiv(N, BLOCK_N)
    for tile in range(pid, n_row_tiles_bound * n_col_tiles, n_programs):
        row_tile = tile // n_col_tiles
        col_tile = tile % n_col_tiles
        expert, row_start, row_end = find_tile(row_tile, counts_ptr, E, BLOCK_M)
        if expert < E:
            rows = row_start + tl.arange(0, BLOCK_M)
            rmask = (rows < row_end) & (rows < T)
            rows64 = rows.to(tl.int64)
            n = col_tile * BLOCK_N + tl.arange(0, BLOCK_N)
            nmask = n < N
            b_base = b_ptr + expert.to(tl.int64) * b_e_stride
            if EPILOGUE == EPI_GLU:
                gate_n, up_n = glu_cols(n, F, INTERLEAVE)
            else:
                gate_n = n
                up_n = n
            acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
            acc_up = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
            for k0 in range(0, K, BLOCK_K):
                k = k0 + tl.arange(0, BLOCK_K)
                kmask = k < K
                a = tl.load(a_ptr + rows64[:, None] * lda + k[None, :], mask=rmask[:, None] & kmask[None, :],
                            other=0.0)
                bmask = kmask[:, None] & nmask[None, :]
                b = tl.load(b_base + k[:, None] * b_k_stride + gate_n[None, :] * b_n_stride, mask=bmask, other=0.0)
                acc = dot_f32acc(a, b, acc, IEEE)
                if EPILOGUE == EPI_GLU:
                    b_up = tl.load(b_base + k[:, None] * b_k_stride + up_n[None, :] * b_n_stride, mask=bmask,
                                   other=0.0)
                    acc_up = dot_f32acc(a, b_up, acc_up, IEEE)
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
                gate_j, up_j = glu_cols(n, F, INTERLEAVE)
                zg = tl.load(z_ptr + rows64[:, None] * ldz + gate_j[None, :], mask=mask, other=0.0).to(tl.float32)
                zu = tl.load(z_ptr + rows64[:, None] * ldz + up_j[None, :], mask=mask, other=0.0).to(tl.float32)
                p = tl.load(probs_ptr + rows64, mask=rmask, other=0.0).to(tl.float32)
                a_val = glu_act(zg, zu, ACT)
                partial = tl.sum(tl.where(mask, acc * a_val, 0.0), axis=1)
                tl.store(part_ptr + rows64 * n_part_cols + col_tile, partial, mask=rmask)
                dzg, dzu = glu_act_grad(zg, zu, acc * p[:, None], ACT)
                tl.store(c_ptr + rows64[:, None] * ldc + gate_j[None, :], to_output(dzg, c_ptr), mask=mask)
                tl.store(c_ptr + rows64[:, None] * ldc + up_j[None, :], to_output(dzu, c_ptr), mask=mask)


@triton.jit
def _expert_rows(counts_ptr, expert, E):
    """(first row, row count) of ``expert`` from the device-side counts."""
    start = 0
    m = 0
    for e in range(0, E):
        c = tl.load(counts_ptr + e).to(tl.int32)
        start += tl.where(e < expert, c, 0)
        m = tl.where(e == expert, c, m)
    return start, m


@triton.jit
def grouped_wgrad_kernel(
    a_ptr, b_ptr, c_ptr, counts_ptr,
    T, N, M, E, lda, ldb,
    IEEE: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr,
):
    """Ragged-K weight gradients: C[e] (N, M) = A[rows of e]^T @ B[rows of e].

    a_ptr: (T, N) row stride lda (dz for dW1, dy for dW2); b_ptr: (T, M) row stride ldb (x, h).
    c_ptr: (E, N, M) contiguous, written in full (zeros for experts without tokens).
    Grid: (E * cdiv(N, BLOCK_N), cdiv(M, BLOCK_M)); K walks the expert's rows in BLOCK_K steps.
    """
    pid = tl.program_id(0)
    n_n_tiles = tl.cdiv(N, BLOCK_N)
    expert = pid // n_n_tiles
    n = (pid % n_n_tiles) * BLOCK_N + tl.arange(0, BLOCK_N)
    m = tl.program_id(1) * BLOCK_M + tl.arange(0, BLOCK_M)
    nmask = n < N
    mmask = m < M
    start, count = _expert_rows(counts_ptr, expert, E)
    acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    for k0 in range(0, count, BLOCK_K):
        rows = start + k0 + tl.arange(0, BLOCK_K)
        rmask = (rows < start + count) & (rows < T)
        rows64 = rows.to(tl.int64)
        at = tl.load(a_ptr + rows64[None, :] * lda + n[:, None], mask=nmask[:, None] & rmask[None, :], other=0.0)
        b = tl.load(b_ptr + rows64[:, None] * ldb + m[None, :], mask=rmask[:, None] & mmask[None, :], other=0.0)
        acc = dot_f32acc(at, b, acc, IEEE)
    out = c_ptr + expert.to(tl.int64) * N * M + n[:, None] * M + m[None, :]
    tl.store(out, to_output(acc, c_ptr), mask=nmask[:, None] & mmask[None, :])


@triton.jit
def grouped_colsum_kernel(
    a_ptr, scale_ptr, c_ptr, counts_ptr, T, N, E, lda,
    HAS_SCALE: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_N: tl.constexpr,
):
    """Bias gradients: C[e, n] = sum over rows t of e of scale[t] * A[t, n] (scale = 1 without
    HAS_SCALE), float32 accumulation in row order; zeros for experts without tokens.
    Grid: (E, cdiv(N, BLOCK_N))."""
    expert = tl.program_id(0)
    n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    nmask = n < N
    start, count = _expert_rows(counts_ptr, expert, E)
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
