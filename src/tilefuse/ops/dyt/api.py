"""The public functional API of DyT: argument checks, then the kernels' autograd.Function
(eager) or custom op (traced), or, at level 0 and for float64 tensors, the plain-PyTorch
reference with ordinary autograd.

Eager calls take the lean path: the checks' outcome, the route and every launch parameter
come from the call's cached plan (plan.py), and op.apply enters the autograd.Function."""

from __future__ import annotations

import torch

from ... import policy
from ...utils import FxProxy, fx_node, readable
from . import plan as plans
from . import reference
from .op import apply, dyt_op
from .plan import ACCEPTED_DTYPES, validate

_proxy_mode, _jit_tracing = policy._active_proxy_mode, torch._C._is_tracing

__all__ = ["ACCEPTED_DTYPES", "dyt", "validate"]



def dyt(x: torch.Tensor, alpha: torch.Tensor, weight: torch.Tensor,
        bias: torch.Tensor | None = None, *, channels_last: bool = True) -> torch.Tensor:
    """Dynamic Tanh: ``y = weight * tanh(alpha * x) + bias``.

    Args:
        x: (..., C) with ``channels_last=True``; (N, C, *spatial) otherwise. float32, bfloat16,
            float16 or float64. Any row count; any strides (other than the layouts the kernels
            read directly, a contiguous copy is made).
        alpha: one element (shape (1,) or ()), float32, bfloat16, float16 or float64.
        weight: (C,); bias: (C,) or None. Each of those four dtypes, independent of x's.

    Returns:
        y with x's shape and dtype. Gradients: dx in x.dtype; dalpha, dweight, dbias each in
        its parameter's dtype, accumulated in float32.

    Paths: level 0 runs the float32 reference with ordinary autograd; a float64 tensor among
    the arguments runs the float64 reference at every level (the kernels take 16/32-bit
    floats), so ``torch.autograd.gradcheck`` and ``.double()`` models work. A wrapper tensor
    subclass among them (a DTensor, say: tensor parallelism's sequence-parallel norms) runs the
    reference at every level too, eagerly, as level 0 does: its torch ops give a result of its
    class (the kernels read memory, which such a wrapper does not own). Otherwise the
    kernels (or, where they cannot run, the reference formulas) run inside an
    ``autograd.Function`` with ``setup_context``, so ``torch.func.grad`` / ``vjp`` / ``vmap``
    (and compositions such as ``jacrev``) work; under ``vmap`` the reference formulas run
    (the kernels take plain tensors). Double backward (``create_graph=True``) works: that
    backward evaluates the backward formulas in differentiable PyTorch ops (float32)
    instead of the kernel. Forward-mode AD (``jvp``, ``jacfwd``, dual tensors) runs the kernels'
    forward and the tangent's formula in torch ops (float32); a backward reached by dual
    tensors (forward-over-reverse) runs the backward formulas, which carry them. Inside
    torch.compile, under torch.func transforms or forward-mode AD, the float32 reference is
    traced instead of the custom op, which they differentiate and batch: jvp and
    forward-mode AD work there.

    Example:
        >>> x = torch.randn(8, 16)
        >>> y = tilefuse.dyt(x, torch.tensor([0.5]), torch.ones(16), torch.zeros(16))
    """
    if type(x) is FxProxy:   # torch.fx.symbolic_trace: one node (utils.fx_node)
        return fx_node(dyt, x, alpha, weight, bias, channels_last=channels_last)
    compiling = torch.compiler.is_compiling()
    if compiling:
        # Traced: the checks and the level are read while tracing; the custom op decides the
        # kernel path when the graph runs (op.py).
        plan, wrapped = None, False
        f64, level = validate(x, alpha, weight, bias, channels_last), policy.get_level()
    else:
        # a negative-bit view or a ZeroTensor: memory the kernels cannot read as the values
        # (utils.unreadable, written out: four calls of it add about 0.15 us to this hot path)
        try:
            odd = (x.is_neg() or alpha.is_neg() or weight.is_neg() or x._is_zerotensor() or alpha._is_zerotensor()
                   or weight._is_zerotensor() or (bias is not None and (bias.is_neg() or bias._is_zerotensor())))
        except AttributeError:   # not tensors: validate names them
            odd = False
        if odd:
            x, alpha, weight, bias = map(readable, (x, alpha, weight, bias))   # utils.readable
        if _proxy_mode() is not None or _jit_tracing():   # policy.recording_trace, inlined
            # make_fx / torch.jit.trace record torch ops, not a kernel's writes: the reference,
            # whatever plan the key has (policy.eager_tracing)
            f64 = validate(x, alpha, weight, bias, channels_last)
            return reference.dyt_reference(x, alpha, weight, bias, channels_last=channels_last,
                                           compute_dtype=plans.compute_dtype(f64))
        plan = plans.lookup(x, alpha, weight, bias, channels_last)    # raises validate's errors
        if plan.foreign:   # the kernels launch on the current device (device.on_tensor_device)
            with torch.cuda.device(x.device):
                return dyt(x, alpha, weight, bias, channels_last=channels_last)
        f64, level, wrapped = plan.f64, plan.level, plan.wrapped
    if f64 or level == 0 or wrapped:
        # The reference with ordinary autograd, in float64 where a tensor is, else float32. A
        # wrapper subclass (DTensor, ...: policy.wraps_tensors) among the arguments runs it too:
        # its own torch ops give a result of its class (plan.Plan.wrapped).
        return reference.dyt_reference(x, alpha, weight, bias, channels_last=channels_last,
                                       compute_dtype=plans.compute_dtype(f64))
    if compiling:
        if policy.differentiating():
            # torch.func transforms or forward-mode AD traced by Dynamo (both read while
            # tracing, and guarded): the custom op has a backward rule only, so a jvp through
            # it would be a zero tangent and grad / vmap would fail on its wrapped tensors; the
            # float32 reference (level 0's path), which they differentiate and batch
            return reference.dyt_reference(x, alpha, weight, bias, channels_last=channels_last)
        return dyt_op(x, alpha, weight, bias, channels_last)
    return apply(x, alpha, weight, bias, channels_last, plan)
