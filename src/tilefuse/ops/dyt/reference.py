"""Plain-PyTorch DyT: the semantics. Used by tests, benchmarks, and as the fallback path.

    y = weight * tanh(alpha * x) + bias

channels_last: ``weight``/``bias`` index the last dim of ``x``. channels-first: ``x`` is
(N, C, *spatial) and they index dim 1.
"""

from __future__ import annotations

import torch


def _param_view(p: torch.Tensor, x: torch.Tensor, channels_last: bool) -> torch.Tensor:
    if channels_last:
        return p
    return p.reshape((1, -1) + (1,) * (x.dim() - 2))


def dyt_reference(x, alpha, weight, bias=None, *, channels_last=True, compute_dtype=torch.float32):
    """Differentiable forward in ``compute_dtype``; the result is returned in ``x.dtype``.

    With ``compute_dtype=torch.float64`` and float64 inputs this is the test oracle.
    """
    xc = x.to(compute_dtype)
    t = torch.tanh(alpha.to(compute_dtype) * xc)
    y = _param_view(weight.to(compute_dtype), x, channels_last) * t
    if bias is not None:
        y = y + _param_view(bias.to(compute_dtype), x, channels_last)
    return y.to(x.dtype)


def dyt_jvp_reference(x, alpha, weight, bias, tangents, *, channels_last=True, compute_dtype=torch.float32):
    """The forward-mode derivative of ``dyt_reference`` along ``tangents`` = (dx, dalpha,
    dweight, dbias), each None where its input has none, in ``compute_dtype``; returned in
    ``x.dtype``. With t = tanh(alpha x): dy = w (1 - t^2) (dalpha x + alpha dx) + dw t + db."""
    dx, dalpha, dweight, dbias = tangents
    xc = x.to(compute_dtype)
    a = alpha.to(compute_dtype)
    t = torch.tanh(a * xc)
    out = torch.zeros_like(xc)
    inner = None
    if dx is not None:
        inner = a * dx.to(compute_dtype)
    if dalpha is not None:
        term = dalpha.to(compute_dtype) * xc
        inner = term if inner is None else inner + term
    if inner is not None:
        out = out + _param_view(weight.to(compute_dtype), x, channels_last) * (1 - t * t) * inner
    if dweight is not None:
        out = out + _param_view(dweight.to(compute_dtype), x, channels_last) * t
    if dbias is not None:
        out = out + _param_view(dbias.to(compute_dtype), x, channels_last)
    return out.to(x.dtype)


def _reduce_to_channels(v: torch.Tensor, channels_last: bool) -> torch.Tensor:
    if channels_last:
        if v.shape[-1] == 0:   # reshape(-1, 0) is ambiguous without elements: sum the leading dims
            # (a copy, not v: a custom op's output may not alias its input)
            return v.clone() if v.dim() == 1 else v.sum(tuple(range(v.dim() - 1)))
        return v.reshape(-1, v.shape[-1]).sum(0)
    dims = [0] + list(range(2, v.dim()))
    return v.sum(dims)


def dyt_backward_reference(dy, x, alpha, weight, bias=None, *, channels_last=True,
                           compute_dtype=torch.float32):
    """Explicit backward formulas of the spec, accumulated in ``compute_dtype``.

    Returns ``(dx, dalpha, dweight, dbias)``: ``dx`` in ``x.dtype``, each parameter gradient in
    its parameter's dtype (``dbias`` is ``None`` without a bias). The same ops, in the same
    order, as autograd's backward of ``dyt_reference`` (``aten.tanh_backward`` for the
    (1 - t^2) factor: its kernel rounds unlike the written-out product), so where the kernels
    do not run (level 0, float64) the custom op's backward, which calls this, gives the eager
    call's gradients bit for bit.
    """
    xc = x.to(compute_dtype)
    dyc = dy.to(compute_dtype)
    a = alpha.to(compute_dtype)
    t = torch.tanh(a * xc)
    g = torch.ops.aten.tanh_backward(dyc * _param_view(weight.to(compute_dtype), x, channels_last), t)
    dx = (g * a).to(x.dtype)
    dalpha = (g * xc).sum().reshape(alpha.shape).to(alpha.dtype)
    dweight = _reduce_to_channels(dyc * t, channels_last).to(weight.dtype)
    dbias = None if bias is None else _reduce_to_channels(dyc, channels_last).to(bias.dtype)
    return dx, dalpha, dweight, dbias
