"""The public functional API of DyT: argument checks, then the custom op (or, at level 0 and
for float64 tensors, the plain-PyTorch reference with ordinary autograd)."""

from __future__ import annotations

import torch

from ... import policy
from . import reference
from .op import DyTFunction, dyt_op

FLOAT_DTYPES = (torch.float32, torch.bfloat16, torch.float16)   # what the kernels take
# float64 runs the reference in float64 (gradcheck, .double() models), never a kernel.
ACCEPTED_DTYPES = FLOAT_DTYPES + (torch.float64,)


def _check_float(name: str, t) -> bool:
    """Whether t is float64; TypeError naming it unless it is a tensor of ACCEPTED_DTYPES."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"dyt: {name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dtype not in ACCEPTED_DTYPES:
        raise TypeError(f"dyt: {name} must be float32, bfloat16, float16 or float64, got {t.dtype}")
    return t.dtype == torch.float64


def validate(x, alpha, weight, bias, channels_last: bool) -> bool:
    """Raise TypeError/ValueError naming the offending argument; returns whether any tensor
    is float64 (the float64 reference runs then)."""
    f64 = _check_float("x", x) | _check_float("alpha", alpha) | _check_float("weight", weight)
    if bias is not None:
        f64 |= _check_float("bias", bias)
    if not isinstance(channels_last, bool):
        raise TypeError(f"dyt: channels_last must be a bool, got {type(channels_last).__name__}")
    if alpha.numel() != 1:
        raise ValueError(f"dyt: alpha must have exactly one element, got shape {tuple(alpha.shape)}")
    if channels_last:
        if x.dim() < 1:
            raise ValueError("dyt: x must have at least 1 dimension (..., C)")
        channels = x.shape[-1]
    else:
        if x.dim() < 2:
            raise ValueError(f"dyt: channels-first x must be (N, C, *spatial), got shape {tuple(x.shape)}")
        channels = x.shape[1]
    for name, p in (("weight", weight), ("bias", bias)):
        if p is None:
            continue
        if p.dim() != 1 or p.shape[0] != channels:
            where = "last" if channels_last else "channel (dim 1)"
            raise ValueError(f"dyt: {name} must have shape ({channels},) to match x's {where} "
                             f"dimension, got {tuple(p.shape)}")
    for name, p in (("alpha", alpha), ("weight", weight), ("bias", bias)):
        if p is not None and p.device != x.device:
            raise ValueError(f"dyt: {name} is on {p.device} but x is on {x.device}")
    return f64


def dyt(x: torch.Tensor, alpha: torch.Tensor, weight: torch.Tensor,
        bias: torch.Tensor | None = None, *, channels_last: bool = True) -> torch.Tensor:
    """Dynamic Tanh: ``y = weight * tanh(alpha * x) + bias``.

    Args:
        x: (..., C) with ``channels_last=True``; (N, C, *spatial) otherwise. float32, bfloat16,
            float16 or float64. Any row count; any strides (other than the layouts the kernels
            read directly, a contiguous copy is made).
        alpha: one element (shape (1,) or ()), any float dtype.
        weight: (C,); bias: (C,) or None. Any float dtypes, independent of x's.

    Returns:
        y with x's shape and dtype. Gradients: dx in x.dtype; dalpha, dweight, dbias each in
        its parameter's dtype, accumulated in float32.

    Paths: level 0 runs the float32 reference with ordinary autograd; a float64 tensor among
    the arguments runs the float64 reference at every level (the kernels take 16/32-bit
    floats), so ``torch.autograd.gradcheck`` and ``.double()`` models work. Otherwise the
    kernels (or, where they cannot run, the reference formulas) run inside an
    ``autograd.Function`` with ``setup_context``, so ``torch.func.grad`` / ``vjp`` / ``vmap``
    (and compositions such as ``jacrev``) work; under ``vmap`` the reference formulas run
    (the kernels take plain tensors). Double backward (``create_graph=True``) works: that
    backward evaluates the backward formulas in differentiable PyTorch ops (float32)
    instead of the kernel. Forward-mode AD (``jvp``) is not implemented.

    Example:
        >>> x = torch.randn(8, 16)
        >>> y = tilefuse.dyt(x, torch.tensor([0.5]), torch.ones(16), torch.zeros(16))
    """
    f64 = validate(x, alpha, weight, bias, channels_last)
    if f64 or policy.get_level() == 0:
        return reference.dyt_reference(x, alpha, weight, bias, channels_last=channels_last,
                                       compute_dtype=torch.float64 if f64 else torch.float32)
    if torch.compiler.is_compiling():
        return dyt_op(x, alpha, weight, bias, channels_last)
    return DyTFunction.apply(x, alpha, weight, bias, channels_last)
