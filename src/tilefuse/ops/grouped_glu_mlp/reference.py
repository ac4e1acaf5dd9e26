"""Plain-PyTorch grouped_glu_mlp: the semantics (docs/specs/grouped_glu_mlp.md), and the unfused
composition the kernels are measured against.

Rows are grouped by expert: expert e owns rows [o_e, o_e + m_e) of x, m_e = tokens_per_expert[e],
o_e = m_0 + ... + m_{e-1}, and sum(m_e) = T. Per row t of expert e (p_t = probs[t]):

    z_t = x_t W1_e^T (+ b1_e)                    W1_e = fc1_weight[e] (2F, H), b1_e (2F,)
    a_t = act(z_t[gate columns], z_t[up columns])  (F,)
    h_t = p_t a_t
    y_t = h_t W2_e^T (+ p_t b2_e)                W2_e = fc2_weight[e] (H, F), b2_e (H,)

GLU column order (``glu_interleave = s``): FC1's 2F output columns come in blocks of 2s, s gate
columns then s up columns; gate j is column g(j) = 2s floor(j/s) + (j mod s), up j is
u(j) = g(j) + s. ``None`` means halves (gate = z[:, :F], up = z[:, F:]). The gate is the first of
each pair, the opposite of ``torch.nn.GLU``.

Activations (computed in the dtype of their arguments):
    swiglu: a = silu(g) u
    geglu:  a = (clamp(u, -L, L) + 1) g' sigmoid(1.702 g'),  g' = min(g, L),  L = 7
            (the clamped quick-gelu form; the gate is clamped from above only).

Three renderings live here:

- ``grouped_glu_mlp_reference``: a per-expert loop in ``compute_dtype`` (float64 for the test
  oracle), differentiable by autograd.
- ``grouped_glu_mlp_backward_reference``: the spec's explicit backward formulas, in the order the
  kernels evaluate them; tested against autograd of the reference.
- ``grouped_glu_mlp_unfused``: the composition users write without tilefuse (grouped GEMM, the
  activation as separate torch ops, grouped GEMM), differentiable by autograd. It is the op's
  level-0 path and its path wherever the compose route (compose.py: the same GEMMs with
  tilefuse's glue kernels, the tuner's baseline) cannot run; benchmarks time it as the plain
  composition.

The first two read ``tokens_per_expert`` on the host (they are oracles, not hot paths) and check
its sum there. The unfused composition does not, except in its per-expert-loop fallback (see its
docstring).

All three run their forward GEMMs in the dtype they state whatever the caller's autocast region
(``gemms_in_dtype``): under ``torch.autocast`` a float32 ``@`` would run in bfloat16 and return
bfloat16, so y's dtype and precision would depend on the path. The gradients autograd takes of
their ops run where the backward is called, as for any torch code: a backward called inside an
autocast region runs the per-expert loops' ``torch.mm`` gradients in its dtype (float32
gradients with bfloat16 GEMMs' error, 2e-3 to 4e-3 on the CPU, against 1e-7 outside it;
``torch._grouped_mm`` has no autocast rule). PyTorch advises calling backward outside autocast.
"""

from __future__ import annotations

import itertools

import torch
import torch.nn.functional as F
from torch._subclasses.fake_tensor import is_fake

from ...policy import is_eager_fake
from ...utils import gemms_in_dtype, readable
from ..autograd_common import is_batched

ACTIVATIONS = ("swiglu", "geglu")
GEGLU_LIMIT = 7.0     # L of the clamped GeGLU
GEGLU_ALPHA = 1.702   # quick-gelu: gelu(v) ~ v sigmoid(1.702 v)


# ---------------------------------------------------------------------------------------------
# GLU column layout
def _check_interleave(ffn: int, glu_interleave: int | None) -> None:
    if glu_interleave is None:
        return
    if isinstance(glu_interleave, bool) or not isinstance(glu_interleave, int) or glu_interleave < 1:
        raise ValueError(f"glu_interleave must be None or a positive int, got {glu_interleave!r}")
    if ffn % glu_interleave:
        raise ValueError(f"glu_interleave={glu_interleave} must divide the FFN width F={ffn}")


def glu_index(ffn: int, glu_interleave: int | None, device=None) -> tuple[torch.Tensor, torch.Tensor]:
    """FC1 output columns of gate j and up j, j in [0, F): two int64 tensors of shape (F,).

    ``glu_interleave = s``: g(j) = 2s floor(j/s) + (j mod s), u(j) = g(j) + s.
    ``None``: g(j) = j, u(j) = F + j.

    Example:
        >>> glu_index(4, 2)
        (tensor([0, 1, 4, 5]), tensor([2, 3, 6, 7]))
    """
    _check_interleave(ffn, glu_interleave)
    j = torch.arange(ffn, device=device)
    if glu_interleave is None:
        return j, j + ffn
    s = glu_interleave
    gate = 2 * s * torch.div(j, s, rounding_mode="floor") + j % s
    return gate, gate + s


def split_glu(z: torch.Tensor, glu_interleave: int | None) -> tuple[torch.Tensor, torch.Tensor]:
    """(gate, up) of FC1 outputs z (..., 2F) as strided views, no copy.

    With ``glu_interleave = s`` the views have shape (..., F/s, s) (block-major: gate j is
    element [..., j // s, j % s]); flatten the last two dimensions of anything computed from
    them to get (..., F). With ``None`` they are (..., F). Equal to
    ``z[..., glu_index(F, s)[0]]`` / ``[1]`` (tested), without the gather.
    """
    two_ffn = z.shape[-1]
    if two_ffn % 2:
        raise ValueError(f"z's last dimension must be 2F (even), got {two_ffn}")
    ffn = two_ffn // 2
    _check_interleave(ffn, glu_interleave)
    if glu_interleave is None:
        return z[..., :ffn], z[..., ffn:]
    blocks = z.unflatten(-1, (ffn // glu_interleave, 2, glu_interleave))
    return blocks[..., 0, :], blocks[..., 1, :]


# ---------------------------------------------------------------------------------------------
# Activations
def _check_activation(activation: str) -> None:
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {ACTIVATIONS}, got {activation!r}")


def glu_activation(z_gate: torch.Tensor, z_up: torch.Tensor, activation: str) -> torch.Tensor:
    """a = act(gate, up), elementwise, in the dtype of the arguments (callers pass fp32/fp64).

    geglu clamps with ``torch.clamp``, whose gradient passes at the bounds (g == L, |u| == L);
    the explicit backward below uses the same inclusive masks. (``torch.minimum(g, L)`` would
    split the gradient in half at g == L.)
    """
    _check_activation(activation)
    if activation == "swiglu":
        return F.silu(z_gate) * z_up
    gate = z_gate.clamp(max=GEGLU_LIMIT)
    up = z_up.clamp(-GEGLU_LIMIT, GEGLU_LIMIT)
    return (up + 1) * (gate * torch.sigmoid(GEGLU_ALPHA * gate))


def glu_activation_backward(da: torch.Tensor, z_gate: torch.Tensor, z_up: torch.Tensor,
                            activation: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(dz_gate, dz_up) of ``glu_activation`` for the upstream gradient ``da``.

    swiglu (sigma = sigmoid(g)):
        dz_up = da silu(g);  dz_gate = da u sigma (1 + g (1 - sigma))
    geglu (g' = min(g, L), u' = clamp(u, -L, L), q = g' sigmoid(1.702 g'), sigma = sigmoid(1.702 g')):
        dz_up = da q [-L <= u <= L];  dz_gate = da (u' + 1) sigma (1 + 1.702 g' (1 - sigma)) [g <= L]
    """
    _check_activation(activation)
    if activation == "swiglu":
        sigma = torch.sigmoid(z_gate)
        return da * z_up * sigma * (1 + z_gate * (1 - sigma)), da * z_gate * sigma
    gate = z_gate.clamp(max=GEGLU_LIMIT)
    up = z_up.clamp(-GEGLU_LIMIT, GEGLU_LIMIT)
    sigma = torch.sigmoid(GEGLU_ALPHA * gate)
    gate_pass = z_gate <= GEGLU_LIMIT
    up_pass = (z_up >= -GEGLU_LIMIT) & (z_up <= GEGLU_LIMIT)
    d_gate = da * (up + 1) * sigma * (1 + GEGLU_ALPHA * gate * (1 - sigma))
    d_up = da * gate * sigma
    return torch.where(gate_pass, d_gate, 0.0), torch.where(up_pass, d_up, 0.0)


# ---------------------------------------------------------------------------------------------
# GEMM precision
# ---------------------------------------------------------------------------------------------
# Expert row ranges
def expert_rows(tokens_per_expert: torch.Tensor, n_tokens: int) -> list[tuple[int, int, int]]:
    """[(e, start, stop)] for every expert, reading ``tokens_per_expert`` on the host (a device
    synchronization on CUDA: for oracles and fallbacks only). Raises ValueError naming
    ``tokens_per_expert`` when a count is negative or the counts do not sum to ``n_tokens``."""
    counts = [int(c) for c in tokens_per_expert.tolist()]
    if any(c < 0 for c in counts):
        raise ValueError(f"tokens_per_expert must be non-negative, got {counts}")
    if sum(counts) != n_tokens:
        raise ValueError(f"tokens_per_expert must sum to the number of rows of x (T = {n_tokens}), "
                         f"got sum {sum(counts)}")
    ends = list(itertools.accumulate(counts))
    return [(e, end - count, end) for e, (count, end) in enumerate(zip(counts, ends))]


# ---------------------------------------------------------------------------------------------
# Random problems (tests, `tilefuse check`, tuning sweeps, benchmarks)
def random_inputs(counts, hidden: int, ffn: int, dtype: torch.dtype, *, bias: bool, device,
                  generator: torch.Generator | None = None) -> dict:
    """A random problem: ``x`` (T, H), ``counts`` (int32 on ``device``), ``probs`` U(0, 1)
    float32, ``w1`` (E, 2F, H) and ``w2`` (E, H, F) scaled by fan-in^-1/2, ``b1`` / ``b2`` (0.1
    scale; None without ``bias``), ``dy`` (T, H); floating tensors in ``dtype`` but probs.

    counts: a list of ints or an int tensor (E,). Values are drawn in that order from
    ``generator`` on its own device and moved to ``device``, or from the default generator on
    ``device``."""
    counts = torch.as_tensor(counts, dtype=torch.int32)
    n_experts, n_tokens = counts.shape[0], int(counts.sum())
    draw = generator.device if generator is not None else torch.device(device)

    def randn(*shape, scale=1.0):
        return (torch.randn(shape, generator=generator, device=draw) * scale).to(dtype).to(device)

    x = randn(n_tokens, hidden)
    probs = torch.rand(n_tokens, generator=generator, device=draw).to(device)
    w1, w2 = randn(n_experts, 2 * ffn, hidden, scale=hidden ** -0.5), randn(n_experts, hidden, ffn, scale=ffn ** -0.5)
    b1 = randn(n_experts, 2 * ffn, scale=0.1) if bias else None
    b2 = randn(n_experts, hidden, scale=0.1) if bias else None
    return dict(x=x, counts=counts.to(device), probs=probs, w1=w1, w2=w2, b1=b1, b2=b2, dy=randn(n_tokens, hidden))


# ---------------------------------------------------------------------------------------------
# The oracle: forward and explicit backward
def grouped_glu_mlp_reference(x, tokens_per_expert, probs, fc1_weight, fc2_weight, *, activation="swiglu",
                              glu_interleave=32, fc1_bias=None, fc2_bias=None, compute_dtype=torch.float32):
    """Per-expert loop in ``compute_dtype``, differentiable by autograd; y (T, H) in ``x.dtype``.

    x (T, H); tokens_per_expert (E,) integer (read on the host); probs (T,); fc1_weight (E, 2F, H);
    fc2_weight (E, H, F); fc1_bias (E, 2F) or None; fc2_bias (E, H) or None. No argument
    checking beyond the counts: call ``validate`` first where inputs come from users.
    With float64 inputs and ``compute_dtype=torch.float64`` this is the test oracle. The
    GEMMs run in ``compute_dtype`` under any autocast region (``gemms_in_dtype``).
    """
    cd = compute_dtype
    n_tokens, hidden = x.shape[0], fc2_weight.shape[1]
    gate_idx, up_idx = glu_index(fc2_weight.shape[-1], glu_interleave, device=x.device)
    xc, pc = x.to(cd), probs.to(cd)
    pieces = []
    with gemms_in_dtype(x):
        for e, start, stop in expert_rows(tokens_per_expert, n_tokens):
            z = xc[start:stop] @ fc1_weight[e].to(cd).t()
            if fc1_bias is not None:
                z = z + fc1_bias[e].to(cd)
            p = pc[start:stop, None]
            h = p * glu_activation(z[:, gate_idx], z[:, up_idx], activation)
            y = h @ fc2_weight[e].to(cd).t()
            if fc2_bias is not None:
                y = y + p * fc2_bias[e].to(cd)
            pieces.append(y)
    y = torch.cat(pieces) if pieces else xc.new_zeros((n_tokens, hidden))
    return y.to(x.dtype)


def grouped_glu_mlp_backward_reference(dy, x, tokens_per_expert, probs, fc1_weight, fc2_weight, *, activation,
                                       glu_interleave, fc1_bias=None, fc2_bias=None,
                                       compute_dtype=torch.float32) -> dict:
    """The spec's explicit backward, per expert, in ``compute_dtype`` (z is recomputed).

    Returns ``{"dx", "dprobs", "dfc1_weight", "dfc2_weight", "dfc1_bias", "dfc2_bias"}``, each in
    its input's dtype (the bias gradients are None without the bias). Per expert e:

        dh = dY W2_e                          dprobs_t = sum_j dh_tj a_tj (+ dy_t . b2_e)
        da = p dh                             (dz_gate, dz_up) = glu_activation_backward(da, ...)
        dX = dZ W1_e                          dW2_e = dY^T (p A);  dW1_e = dZ^T X
        db1_e = sum_t dz_t                    db2_e = sum_t p_t dy_t

    Experts with zero tokens are skipped, so their weight and bias gradients are exactly zero.
    """
    cd = compute_dtype
    n_experts, two_ffn, hidden = fc1_weight.shape
    n_tokens = x.shape[0]
    gate_idx, up_idx = glu_index(two_ffn // 2, glu_interleave, device=x.device)
    xc, pc, dyc = x.to(cd), probs.to(cd), dy.to(cd)
    zeros = {"dtype": cd, "device": x.device}
    dx = torch.zeros(n_tokens, hidden, **zeros)
    dprobs = torch.zeros(n_tokens, **zeros)
    dw1 = torch.zeros(n_experts, two_ffn, hidden, **zeros)
    dw2 = torch.zeros(n_experts, hidden, two_ffn // 2, **zeros)
    db1 = torch.zeros(n_experts, two_ffn, **zeros)
    db2 = torch.zeros(n_experts, hidden, **zeros)
    with gemms_in_dtype(x):   # the GEMMs in compute_dtype whatever the caller's autocast
        for e, start, stop in expert_rows(tokens_per_expert, n_tokens):
            if start == stop:
                continue
            w1, w2 = fc1_weight[e].to(cd), fc2_weight[e].to(cd)
            xe, dye, p = xc[start:stop], dyc[start:stop], pc[start:stop, None]
            z = xe @ w1.t()
            if fc1_bias is not None:
                z = z + fc1_bias[e].to(cd)
            z_gate, z_up = z[:, gate_idx], z[:, up_idx]
            a = glu_activation(z_gate, z_up, activation)
            dh = dye @ w2
            dp = (dh * a).sum(-1)
            if fc2_bias is not None:
                dp = dp + dye @ fc2_bias[e].to(cd)
            d_gate, d_up = glu_activation_backward(p * dh, z_gate, z_up, activation)
            dz = torch.empty_like(z)
            dz[:, gate_idx] = d_gate
            dz[:, up_idx] = d_up
            dx[start:stop] = dz @ w1
            dprobs[start:stop] = dp
            dw2[e] = dye.t() @ (p * a)
            dw1[e] = dz.t() @ xe
            db1[e] = dz.sum(0)
            db2[e] = (p * dye).sum(0)
    return {
        "dx": dx.to(x.dtype),
        "dprobs": dprobs.to(probs.dtype),
        "dfc1_weight": dw1.to(fc1_weight.dtype),
        "dfc2_weight": dw2.to(fc2_weight.dtype),
        "dfc1_bias": None if fc1_bias is None else db1.to(fc1_bias.dtype),
        "dfc2_bias": None if fc2_bias is None else db2.to(fc2_bias.dtype),
    }


# ---------------------------------------------------------------------------------------------
# The unfused composition
_GROUPED_MM_DTYPES = (torch.bfloat16, torch.float16, torch.float32)


def uses_grouped_mm(x: torch.Tensor, ffn: int) -> bool:
    """Whether ``grouped_glu_mlp_unfused`` runs ``torch._grouped_mm`` for these inputs (else its
    per-expert loop).

    ``torch._grouped_mm`` takes bf16/fp16/fp32 on CPU and CUDA (float64 is refused), and needs
    every row stride of its operands to be a multiple of 16 bytes: H and F (hence 2F) times the
    element size. Measured on torch 2.13 (CPU): a 5-column fp32 x is refused ("strides should be
    multiple of 16 bytes"). Both GEMMs' operands and their backward GEMMs (x^T, dz, h, dy) have
    only H, F or 2F as row strides.
    """
    if x.dtype not in _GROUPED_MM_DTYPES or x.device.type not in ("cpu", "cuda"):
        return False
    if torch.compiler.is_compiling() and x.dtype != torch.bfloat16:
        # _grouped_mm's meta kernel (what torch.compile traces with) accepts bf16 only
        # (torch 2.13: "Expected inputs of BF16 type"), though the eager kernels take all three.
        return False
    return grouped_mm_takes(x.element_size(), x.shape[-1], ffn)


def grouped_mm_takes(itemsize: int, hidden: int, ffn: int) -> bool:
    """Whether eager ``torch._grouped_mm`` takes this op's GEMMs, asked of sizes: it exists, the
    element size is bf16/fp16's or fp32's, and every operand row (H, F, 2F elements) is a
    multiple of 16 bytes (``uses_grouped_mm``'s size rule; the compose route's test, which calls
    ``torch._grouped_mm`` eagerly inside its custom ops, so traced calls too)."""
    if not hasattr(torch, "_grouped_mm") or itemsize not in (2, 4):
        return False
    per_row = 16 // itemsize
    return hidden % per_row == 0 and ffn % per_row == 0


def _aligned16(t: torch.Tensor) -> bool:
    """Whether t's first element is 16-byte aligned: its address; for a fake tensor (no
    address) its storage offset, allocators aligning storage to 64 bytes or more. Under
    torch.compile taken as true (Dynamo traces neither; Inductor copies misaligned graph
    inputs itself)."""
    if torch.compiler.is_compiling():
        return True
    if is_fake(t):
        return t.storage_offset() * t.element_size() % 16 == 0
    return t.data_ptr() % 16 == 0


def _row_major(t: torch.Tensor) -> torch.Tensor:
    """t (..., rows, cols), or a contiguous copy of it: ``torch._grouped_mm``'s operands here (x,
    h and the incoming gradients (rows, cols); the weights (E, N, K), which CUTLASS addresses
    at w + e * stride(0)).

    Taken as they are: each matrix row-major (strides (s, 1), s >= cols), s and the leading
    strides multiples of 16 bytes (0 included: an expanded weight), the first element 16-byte
    aligned; a row slice or a column block of a wider tensor qualifies. Everything else is
    copied:
    - ``torch._grouped_mm`` refuses it ("strides should be multiple of 16 bytes", "Invalid
      strides/sizes": a transposed, expanded or column-strided x; on CUDA "expected data_ptr
      to be aligned to 16 bytes"), or
    - it takes it (column-major) but the backward's ``_grouped_mm(x^T, dz, offs)`` over the
      ragged token dimension then has x^T row-major, for which the CUTLASS kernel (CUDA,
      bf16) asserts on the device that every group is non-empty and a multiple of 16 bytes
      long (GroupMMCommon.cuh); and a column-major or misaligned operand runs other kernels
      with other roundings (CPU, measured), so results would depend on the layout.
    ``clone``, not ``contiguous``: a tensor that ``is_contiguous`` may still have strides
    _grouped_mm refuses (T == 0 with strides (0, 0); a single row whose row stride is 1)."""
    return t if row_major_ok(t) else t.clone(memory_format=torch.contiguous_format)


def row_major_ok(t: torch.Tensor) -> bool:
    """Whether ``_row_major`` takes t as it is (its docstring says when)."""
    per_row = 16 // t.element_size()
    *outer, row_stride, col_stride = t.stride()
    return (col_stride == 1 and row_stride >= max(1, t.shape[-1])
            and all(s % per_row == 0 for s in (*outer, row_stride)) and _aligned16(t))


def _grad_layout(t: torch.Tensor, layout) -> torch.Tensor:
    """t, its gradient brought to ``layout`` (a function of the gradient) on the way in.

    ``torch._grouped_mm``'s backward runs ``_grouped_mm`` on the incoming gradient, which must
    be ``_row_major``: an expanded gradient (``y.sum().backward()`` gives one with strides
    (0, 0), also at T == 0, where ``contiguous`` returns it unchanged) fails with "Invalid
    strides/sizes" (torch 2.13). On the output it also keeps the layout of a caller's
    gradient out of the results (the fc2 bias term of dprobs reduces it along H).

    A ZeroTensor gradient (``torch.sgn``'s backward hands one on: zeros that own no memory,
    strides (0, 0) after any copy) becomes real zeros first (utils.readable); a batched
    one (the older vmap's, ``is_grads_batched``) owns no memory to inspect: made contiguous.

    Under torch.compile ``contiguous`` (Dynamo refuses hooks that branch on strides; AOT
    autograd makes the incoming gradients contiguous itself)."""
    if t.requires_grad:
        t.register_hook(torch.Tensor.contiguous if torch.compiler.is_compiling()
                        else lambda g: g.contiguous() if is_batched(g) else layout(readable(g)))
    return t


class _LaidOutGradient(torch.autograd.Function):
    """The identity, whose backward hands its gradient on with ``_grad_layout``: where that
    gradient is itself differentiated (create_graph), the gradient a second backward brings
    to it is laid out before the first backward's ops read it. The unfused composition's
    inputs pass through it, so the gradients autograd returns for them (torch._grouped_mm's
    backward outputs for x and the weights) take an expanded incoming gradient
    (``g.sum().backward()``), which torch._grouped_mm's own double backward refuses."""

    @staticmethod
    def forward(ctx, t):
        return t.view_as(t)

    @staticmethod
    def backward(ctx, g):
        return _grad_layout(g, _row_major if g.dim() >= 2 else torch.Tensor.contiguous)


def _lay_out_gradients(*tensors):
    """``tensors`` through _LaidOutGradient where a gradient flows to them (not under
    torch.compile, whose AOT autograd makes incoming gradients contiguous itself)."""
    if not torch.is_grad_enabled() or torch.compiler.is_compiling():
        return tensors
    return tuple(_LaidOutGradient.apply(t) if t is not None and t.requires_grad else t for t in tensors)


def assert_counts_on_device(tokens_per_expert: torch.Tensor, n_tokens: int) -> None:
    """Check that every count is in [0, n_tokens] and that they sum to ``n_tokens``, summed in
    int64, with ``torch._assert_async``: no host synchronization. Bounding each count first
    means no sum can wrap (int32 counts that sum to T only modulo 2^32, or int64 ones modulo
    2^64, would give offsets past the rows). On CUDA a failure is a device-side assert (the
    CUDA context is lost; the kernels queued after it do not run, so nothing reads or writes
    out of bounds); on CPU it raises RuntimeError at once."""
    if tokens_per_expert.numel() == 0:
        return
    c = tokens_per_expert
    ok = ((c >= 0) & (c <= n_tokens)).all() & (c.sum(dtype=torch.int64) == n_tokens)
    torch._assert_async(ok, COUNTS_MESSAGE)


COUNTS_MESSAGE = "grouped_glu_mlp: tokens_per_expert must be non-negative and sum to T = x.shape[0]"


def _grouped_linear(inp: torch.Tensor, weight: torch.Tensor, offsets, rows) -> torch.Tensor:
    """out[rows of e] = inp[rows of e] @ weight[e]^T, in inp's dtype: ``torch._grouped_mm`` with
    int32 end offsets on the device when ``rows`` is None, else a loop over the host ranges.
    Meta and fake tensors (neither): an output of the right shape and dtype, differentiable in
    both (there are no values, so which expert's weight shapes it does not matter)."""
    if inp.device.type == "meta" or is_eager_fake(inp):
        return inp @ weight[0].t()
    if rows is None:
        return _grad_layout(torch._grouped_mm(_row_major(inp), _row_major(weight).transpose(-2, -1),
                                              offs=offsets), _row_major)
    # Contiguous operands: matmul's kernels (and roundings) depend on the layout.
    inp, weight = inp.contiguous(), weight.contiguous()
    return torch.cat([inp[start:stop] @ weight[e].t() for e, start, stop in rows])


def grouped_glu_mlp_unfused(x, tokens_per_expert, probs, fc1_weight, fc2_weight, *, activation="swiglu",
                            glu_interleave=32, fc1_bias=None, fc2_bias=None):
    """The unfused composition: grouped GEMM, activation as separate torch ops, grouped GEMM.

    Same arguments and result as ``grouped_glu_mlp_reference`` (y (T, H) in ``x.dtype``),
    differentiable by autograd in every tensor argument.

    Precision: both GEMMs run in ``x.dtype`` (fp32 accumulation inside ``torch._grouped_mm`` for
    16-bit inputs; float32 for float32 inputs, in the process's matmul precision; an autocast
    region does not change them: ``gemms_in_dtype``; its gradients' GEMMs run where the backward
    is called, see the module docstring), so z and h are rounded to ``x.dtype`` as a fused
    kernel's saved z and its h operand are. The bias adds, the activation and the prob scaling
    run in float32 (float64 for float64 inputs), the precision a fused epilogue has.

    GEMMs: ``torch._grouped_mm`` when ``uses_grouped_mm(x, F)`` holds: the offsets are
    ``cumsum(tokens_per_expert)`` on the device and the counts are checked with a device-side
    assert (``assert_counts_on_device``), so this path reads nothing on the host itself. Whether
    ``torch._grouped_mm`` does depends on torch: on CUDA, bf16 on sm90/sm100 runs a CUTLASS
    grouped GEMM without host synchronization; fp16/fp32 on CUDA, and every dtype on CPU, run
    its fallback, a loop over the groups that copies the offsets to the host.
    Otherwise (float64, H or F not a multiple of 16 bytes, no ``torch._grouped_mm``): a
    per-expert loop that reads ``tokens_per_expert`` on the host (a synchronization on CUDA)
    and raises ValueError when the counts are negative or do not sum to T.

    Layout: the gate and up columns are strided views of z (``split_glu``), not gathers.
    Inputs of any strides: ``torch._grouped_mm``'s operands (x, h, the weights, the incoming
    gradients) are copied to a layout it takes only where they are not in one (``_row_major``);
    the other inputs are read by strided torch ops. Meta and fake tensors give
    results (and gradients) of the right shapes and dtypes; nothing is read.
    Biases: rows pick their expert's bias by ``bias[expert_of_row]`` (expert ids from
    ``searchsorted`` on the device). Its backward is ``index_put_(accumulate=True)``, which
    sorts the indices on CUDA (deterministic); on CPU it is deterministic for small tensors or
    under ``torch.use_deterministic_algorithms``. The gathered rows come from a float32 copy
    of the bias so that the per-expert gradient sums accumulate in float32.
    """
    n_tokens = x.shape[0]
    n_experts, two_ffn, _ = fc1_weight.shape
    ffn = two_ffn // 2
    act_dtype = torch.promote_types(x.dtype, torch.float32)

    # No count can be read: meta tensors, and fake ones (FakeTensorMode outside torch.compile)
    # but those torch._grouped_mm's fake kernel takes (bfloat16 only, torch 2.13), which read none
    shapes_only = x.device.type == "meta" or (
        is_eager_fake(x) and not (x.dtype == torch.bfloat16 and uses_grouped_mm(x, ffn)))
    if shapes_only:
        offsets, rows = None, None
    elif uses_grouped_mm(x, ffn):
        assert_counts_on_device(tokens_per_expert, n_tokens)
        offsets = torch.cumsum(tokens_per_expert, 0, dtype=torch.int32)
        rows = None
    else:
        offsets, rows = None, expert_rows(tokens_per_expert, n_tokens)

    expert_of_row = None
    if fc1_bias is not None or fc2_bias is not None:
        ends = offsets if offsets is not None else torch.cumsum(tokens_per_expert, 0)
        expert_of_row = torch.searchsorted(ends, torch.arange(n_tokens, device=x.device, dtype=ends.dtype),
                                           right=True)

    if not shapes_only:   # a second backward's incoming gradients laid out (_LaidOutGradient)
        x, probs, fc1_weight, fc2_weight, fc1_bias, fc2_bias = _lay_out_gradients(
            x, probs, fc1_weight, fc2_weight, fc1_bias, fc2_bias)
    with gemms_in_dtype(x):
        z = _grouped_linear(x, fc1_weight, offsets, rows).to(act_dtype)
        if fc1_bias is not None:
            z = z + fc1_bias.to(act_dtype)[expert_of_row]
        z_gate, z_up = split_glu(z, glu_interleave)
        a = glu_activation(z_gate, z_up, activation).reshape(n_tokens, ffn)
        p = probs.to(act_dtype)[:, None]
        h = (p * a).to(x.dtype)
        y = _grouped_linear(h, fc2_weight, offsets, rows)
    if fc2_bias is not None:
        y = (y.to(act_dtype) + p * fc2_bias.to(act_dtype)[expert_of_row]).to(x.dtype)
    if not shapes_only:
        y = _grad_layout(y, _row_major if rows is None else torch.Tensor.contiguous)
    return y
