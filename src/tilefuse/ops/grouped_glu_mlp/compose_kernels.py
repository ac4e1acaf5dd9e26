"""Triton kernels of grouped_glu_mlp's compose route (compose.py): the elementwise passes
between its torch._grouped_mm GEMMs (the GLU, its backward with dprobs, the fc2 bias), each one
pass over its tensors. Only ``@triton.jit`` code; compose.py launches. The GLU column order and
activations are kernels.py's (glu_cols, glu_act, glu_act_grad), shared with the fused epilogues.

Rows find their expert from ends_ptr, the (E,) int32 inclusive prefix sums of the counts (the
offsets torch._grouped_mm takes): expert e owns rows [ends[e - 1], ends[e]).
"""

import triton
import triton.language as tl

from ..triton_common import to_output
from .kernels import glu_act, glu_act_grad, glu_cols


@triton.jit
def row_experts(rows, ends_ptr, E, E_CHUNK: tl.constexpr):
    """Expert of each of ``rows`` (int32): the number of experts whose rows all lie before it,
    i.e. whose end offset is <= the row (empty experts end where their predecessor does, so
    they are skipped). E for rows at or past T."""
    expert = tl.zeros_like(rows)
    for e0 in range(0, E, E_CHUNK):
        e = e0 + tl.arange(0, E_CHUNK)
        ends = tl.load(ends_ptr + e, mask=e < E, other=2147483647)
        expert += tl.sum((ends[None, :] <= rows[:, None]).to(tl.int32), axis=1)
    return expert


@triton.jit(do_not_specialize=["T"])   # T varies per call
def compose_glu_kernel(
    z_ptr, bias_ptr, ends_ptr, probs_ptr, h_ptr,
    T, F, E, ldz, ldh, bias_e_stride,
    ACT: tl.constexpr, INTERLEAVE: tl.constexpr, HAS_BIAS: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_F: tl.constexpr, E_CHUNK: tl.constexpr,
):
    """h = p * act(z_gate + b1_gate, z_up + b1_up), float32 math, stored in h's dtype.

    z_ptr: (T, 2F) row stride ldz, FC1's output without its bias (x.dtype); bias_ptr: (E, 2F)
    row stride bias_e_stride (HAS_BIAS); ends_ptr: (E,) int32; probs_ptr: (T,) contiguous
    (float32 or x.dtype); h_ptr: (T, F) row stride ldh. Activation column j reads z's columns
    glu_cols(j). Grid: (cdiv(T, BLOCK_M), cdiv(F, BLOCK_F)); one program, one BLOCK_M x
    BLOCK_F tile of h."""
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    j = tl.program_id(1) * BLOCK_F + tl.arange(0, BLOCK_F)
    rmask = rows < T
    mask = rmask[:, None] & (j < F)[None, :]
    rows64 = rows.to(tl.int64)
    gate_j, up_j = glu_cols(j, F, INTERLEAVE)
    z_row = z_ptr + rows64[:, None] * ldz
    zg = tl.load(z_row + gate_j[None, :], mask=mask, other=0.0).to(tl.float32)
    zu = tl.load(z_row + up_j[None, :], mask=mask, other=0.0).to(tl.float32)
    if HAS_BIAS:
        bias_row = bias_ptr + row_experts(rows, ends_ptr, E, E_CHUNK).to(tl.int64)[:, None] * bias_e_stride
        zg += tl.load(bias_row + gate_j[None, :], mask=mask, other=0.0).to(tl.float32)
        zu += tl.load(bias_row + up_j[None, :], mask=mask, other=0.0).to(tl.float32)
    p = tl.load(probs_ptr + rows, mask=rmask, other=0.0).to(tl.float32)
    h = p[:, None] * glu_act(zg, zu, ACT)
    tl.store(h_ptr + rows64[:, None] * ldh + j[None, :], to_output(h, h_ptr), mask=mask)


@triton.jit(do_not_specialize=["T"])   # T varies per call
def compose_dglu_kernel(
    dh_ptr, z_ptr, b1_ptr, ends_ptr, probs_ptr, dy_ptr, b2_ptr, dz_ptr, dprobs_ptr,
    T, F, H, E, lddh, ldz, lddz, ldy, b1_e_stride, b2_e_stride,
    ACT: tl.constexpr, INTERLEAVE: tl.constexpr, HAS_B1: tl.constexpr, HAS_B2: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_F: tl.constexpr, BLOCK_H: tl.constexpr, E_CHUNK: tl.constexpr,
):
    """The GLU's backward from dh = dy W2_e: dz and dprobs, float32 math.

    dh_ptr: (T, F) row stride lddh (x.dtype); z_ptr: (T, 2F) row stride ldz, FC1's output
    without its bias; b1_ptr: (E, 2F) (HAS_B1, added to z as the forward did); ends_ptr: (E,)
    int32; probs_ptr: (T,) contiguous; dy_ptr: (T, H) row stride ldy and b2_ptr: (E, H)
    (HAS_B2: dprobs' fc2-bias term dy_t . b2_e). dz_ptr: (T, 2F) row stride lddz receives
    dz at glu_cols(j) (its dtype); dprobs_ptr: (T,) receives
    sum_j dh_tj act(z_t)_j (+ dy_t . b2_e) in its dtype.
    Grid: (cdiv(T, BLOCK_M),); one program owns BLOCK_M whole rows and walks F (then H) in
    BLOCK_F (BLOCK_H) steps, so each row's dprob is reduced inside one program in a fixed
    order (elementwise accumulation across the steps, one tl.sum at the end): deterministic,
    no atomics, no second pass."""
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rmask = rows < T
    rows64 = rows.to(tl.int64)
    p = tl.load(probs_ptr + rows, mask=rmask, other=0.0).to(tl.float32)
    expert64 = tl.zeros((BLOCK_M,), dtype=tl.int64)
    if HAS_B1 or HAS_B2:
        expert64 = row_experts(rows, ends_ptr, E, E_CHUNK).to(tl.int64)
    dp = tl.zeros((BLOCK_M, BLOCK_F), dtype=tl.float32)
    for j0 in range(0, F, BLOCK_F):
        j = j0 + tl.arange(0, BLOCK_F)
        mask = rmask[:, None] & (j < F)[None, :]
        gate_j, up_j = glu_cols(j, F, INTERLEAVE)
        dh = tl.load(dh_ptr + rows64[:, None] * lddh + j[None, :], mask=mask, other=0.0).to(tl.float32)
        z_row = z_ptr + rows64[:, None] * ldz
        zg = tl.load(z_row + gate_j[None, :], mask=mask, other=0.0).to(tl.float32)
        zu = tl.load(z_row + up_j[None, :], mask=mask, other=0.0).to(tl.float32)
        if HAS_B1:
            b1_row = b1_ptr + expert64[:, None] * b1_e_stride
            zg += tl.load(b1_row + gate_j[None, :], mask=mask, other=0.0).to(tl.float32)
            zu += tl.load(b1_row + up_j[None, :], mask=mask, other=0.0).to(tl.float32)
        dp += tl.where(mask, dh * glu_act(zg, zu, ACT), 0.0)
        dzg, dzu = glu_act_grad(zg, zu, dh * p[:, None], ACT)
        dz_row = dz_ptr + rows64[:, None] * lddz
        tl.store(dz_row + gate_j[None, :], to_output(dzg, dz_ptr), mask=mask)
        tl.store(dz_row + up_j[None, :], to_output(dzu, dz_ptr), mask=mask)
    total = tl.sum(dp, axis=1)
    if HAS_B2:
        db = tl.zeros((BLOCK_M, BLOCK_H), dtype=tl.float32)
        for n0 in range(0, H, BLOCK_H):
            n = n0 + tl.arange(0, BLOCK_H)
            mask = rmask[:, None] & (n < H)[None, :]
            dy = tl.load(dy_ptr + rows64[:, None] * ldy + n[None, :], mask=mask, other=0.0).to(tl.float32)
            b2 = tl.load(b2_ptr + expert64[:, None] * b2_e_stride + n[None, :], mask=mask, other=0.0)
            db += dy * b2.to(tl.float32)
        total += tl.sum(db, axis=1)
    tl.store(dprobs_ptr + rows64, to_output(total, dprobs_ptr), mask=rmask)


@triton.jit(do_not_specialize=["T"])   # T varies per call
def compose_bias_kernel(
    y_ptr, bias_ptr, ends_ptr, probs_ptr, T, N, E, ldy, bias_e_stride,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, E_CHUNK: tl.constexpr,
):
    """In place: y[t, n] = y[t, n] + p_t * bias[expert of t, n], float32 math, rounded to y's
    dtype (the fc2 bias term). y_ptr: (T, N) row stride ldy; bias_ptr: (E, N) row stride
    bias_e_stride; ends_ptr: (E,) int32; probs_ptr: (T,) contiguous.
    Grid: (cdiv(T, BLOCK_M), cdiv(N, BLOCK_N))."""
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    rmask = rows < T
    mask = rmask[:, None] & (n < N)[None, :]
    rows64 = rows.to(tl.int64)
    expert64 = row_experts(rows, ends_ptr, E, E_CHUNK).to(tl.int64)
    p = tl.load(probs_ptr + rows, mask=rmask, other=0.0).to(tl.float32)
    bias = tl.load(bias_ptr + expert64[:, None] * bias_e_stride + n[None, :], mask=mask, other=0.0).to(tl.float32)
    y_tile = y_ptr + rows64[:, None] * ldy + n[None, :]
    y = tl.load(y_tile, mask=mask, other=0.0).to(tl.float32) + p[:, None] * bias
    tl.store(y_tile, to_output(y, y_ptr), mask=mask)


@triton.jit(do_not_specialize=["T"])   # T varies per call
def compose_ends_kernel(counts_ptr, ends_ptr, ok_ptr, E, T, BLOCK_E: tl.constexpr):
    """ends = cumsum(counts) as int32 (the offsets torch._grouped_mm takes) and ok = whether
    every count is in [0, T] and they sum to T, one program: counts_ptr (E,) int32 or int64,
    ends_ptr (E,) int32, ok_ptr a bool; BLOCK_E >= E a power of two. The sum is taken in int64
    of counts bounded by T, so no sum wraps: counts that sum to T only modulo 2^32 (int32) or
    2^64 (int64) are not ok (reference.assert_counts_on_device's rule)."""
    e = tl.arange(0, BLOCK_E)
    counts = tl.load(counts_ptr + e, mask=e < E, other=0).to(tl.int64)
    ends = tl.cumsum(counts, 0)
    tl.store(ends_ptr + e, ends.to(tl.int32), mask=e < E)
    ok = (tl.min(counts, 0) >= 0) & (tl.max(counts, 0) <= T) & (tl.sum(counts, 0) == T)
    tl.store(ok_ptr, ok)

