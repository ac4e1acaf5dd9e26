"""DyT as torch.library custom ops (``tilefuse::dyt``, ``tilefuse::dyt_backward``) for traced
code, and an autograd.Function for eager calls; both run the same implementations.

The custom ops are opaque to torch.compile (fake impls give the output metadata), so
``torch.compile(fullgraph=True)`` traces through them without graph breaks. Which path runs is
decided when the op executes (policy.kernels_enabled): the Triton launchers, or the float32
reference formulas on devices where kernels cannot run (and under ``torch.vmap``, whose
batched tensors the kernels cannot take).

Double backward (``create_graph=True``): the backward then evaluates
``reference.dyt_backward_reference`` (differentiable PyTorch ops on the saved inputs, in the
forward's compute dtype: float64 where an input is float64, else float32) instead of the
kernel, so second derivatives are exact.

Both entry points run a call plan (plan.py): the custom ops look theirs up when they execute,
eager calls hand api.dyt's plan to DyTFunction (``apply``) and on to its backward.
"""

from __future__ import annotations

from typing import Optional

import torch
from torch.autograd import forward_ad

from ...device import on_tensor_device
from ...utils import readable
from ..autograd_common import any_batched, is_batched
from . import launch, reference
from . import plan as plans


@on_tensor_device   # the custom ops run here: x's device current, as api.dyt makes it
def forward_impl(x, alpha, weight, bias, channels_last: bool) -> torch.Tensor:
    """The forward both entry points run: the Triton kernel where kernels may run
    (policy.kernels_enabled), else the float32 reference formulas; Plan.forward."""
    return plans.lookup(x, alpha, weight, bias, channels_last).forward(x, alpha, weight, bias)


@on_tensor_device
def backward_impl(dy, x, alpha, weight, bias, channels_last: bool):
    """(dx, dalpha, dweight, dbias or None), by the kernels or the reference formulas; dy
    checked against x (plan.check_dy)."""
    plans.check_dy(dy, x)
    return plans.lookup(x, alpha, weight, bias, channels_last).backward(dy, x, alpha, weight, bias)


def _setup_context(ctx, inputs, output):
    x, alpha, weight, bias, channels_last = inputs
    ctx.save_for_backward(x, alpha, weight, bias)
    ctx.channels_last = channels_last


def _formula_grads(ctx, dy):
    """create_graph=True: the backward formulas, differentiably, in the dtype the forward's
    plan computes in (module docstring)."""
    x, alpha, weight, bias = ctx.saved_tensors
    dtype = plans.compute_dtype(any(t is not None and t.dtype == torch.float64 for t in (x, alpha, weight, bias)))
    return (*reference.dyt_backward_reference(dy, x, alpha, weight, bias, channels_last=ctx.channels_last,
                                              compute_dtype=dtype), None)


class DyTFunction(torch.autograd.Function):
    """The eager entry point. torch.library's dispatch around a custom op costs tens of
    microseconds of host time per call (measured on the H200 host: benchmarks/results/), more
    than the kernel at small sizes, so eager calls take this plain autograd.Function; traced
    calls take the custom ops below. Both run the call's plan (forward_impl / backward_impl).

    ``plan``: api.dyt's plan for these arguments (``apply`` passes it where no torch.func
    transform is active: the tensors are then plain), or None (``apply`` under transforms):
    look it up. The backward runs the forward's plan while it still holds
    (Plan.backward_if_current).

    New-style (forward without ctx, ``setup_context``), so torch.func transforms accept it;
    ``generate_vmap_rule``: vmap runs forward and backward on batched tensors, which take the
    reference formulas (``_batched``)."""

    generate_vmap_rule = True

    @staticmethod
    def forward(x, alpha, weight, bias, channels_last, plan):
        if plan is not None:
            return plan.forward(x, alpha, weight, bias)
        if any_batched(x, alpha, weight, bias):   # torch.vmap's (the generated vmap rule)
            return reference.dyt_reference(x, alpha, weight, bias, channels_last=channels_last)
        return forward_impl(x, alpha, weight, bias, channels_last)

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, alpha, weight, bias, ctx.channels_last, ctx.plan = inputs
        ctx.save_for_backward(x, alpha, weight, bias)
        if forward_ad._current_level >= 0:   # a forward-mode AD level is open: jvp reads them
            ctx.save_for_forward(x, alpha, weight, bias)

    @staticmethod
    def jvp(ctx, dx, dalpha, dweight, dbias, _channels_last, _plan):
        """Forward-mode AD (torch.func.jvp, jacfwd, dual tensors): the tangent by the
        derivative's formula in torch ops (reference.dyt_jvp_reference; float32, as the
        kernels compute: a float64 call never reaches this Function)."""
        x, alpha, weight, bias = ctx.saved_tensors
        return reference.dyt_jvp_reference(x, alpha, weight, bias, (dx, dalpha, dweight, dbias),
                                           channels_last=ctx.channels_last)

    @staticmethod
    def backward(ctx, dy):
        if torch.is_grad_enabled() or forward_ad._current_level >= 0:
            # create_graph, or dual tensors reaching the backward (forward-over-reverse): the
            # formulas in differentiable torch ops, which carry the tangents (the kernels would
            # drop them)
            return *_formula_grads(ctx, dy), None
        dy = readable(dy)   # the plan's launches read dy's memory as it is
        x, alpha, weight, bias = ctx.saved_tensors
        plan = ctx.plan
        if plan is not None and not is_batched(dy):   # a plan means the forward's tensors were plain
            grads = plan.backward_if_current(dy, x, alpha, weight, bias)
        elif any_batched(dy, x, alpha, weight, bias):
            grads = reference.dyt_backward_reference(dy, x, alpha, weight, bias, channels_last=ctx.channels_last)
        else:
            grads = backward_impl(dy, x, alpha, weight, bias, ctx.channels_last)
        return *grads, None, None


_grad_enabled = torch.is_grad_enabled
_transforms_active = torch._C._are_functorch_transforms_active
_unwrap_dead = torch._C._functorch.unwrap_if_dead
# autograd.Function.apply binds the arguments to forward's signature (inspect.signature on
# every call) before entering the C++ _FunctionBase.apply: 28.6 us a call against 3.8 us for
# the C++ entry alone, measured on a CPU host with a six-argument Function. apply() below
# passes all six arguments positionally, where binding changes nothing, and enters the C++
# apply directly. torch 2.x, torch/autograd/function.py, Function.apply: without active
# torch.func transforms it is unwrap_dead_wrappers(args) then super().apply(*args), which
# apply() repeats; with transforms active apply() calls Function.apply (custom_function_call).
_c_apply = (super(torch.autograd.Function, DyTFunction).apply
            if hasattr(getattr(torch._C, "_FunctionBase", None), "apply") else None)


def apply(x, alpha, weight, bias, channels_last: bool, plan):
    """``DyTFunction.apply(x, alpha, weight, bias, channels_last, plan)``, the cheap way.

    Where autograd would record nothing (grad mode off, or no argument requiring grad, and no
    forward-mode AD level open) the Function's forward output is all it returns, so the
    forward runs without the Function (its C++ entry and setup_context: ~4 us on a CPU host).
    """
    if _c_apply is None or _transforms_active():
        return DyTFunction.apply(x, alpha, weight, bias, channels_last, None)
    x, alpha, weight = _unwrap_dead(x), _unwrap_dead(alpha), _unwrap_dead(weight)
    if bias is not None:
        bias = _unwrap_dead(bias)
    if forward_ad._current_level < 0 and not (_grad_enabled() and (
            x.requires_grad or alpha.requires_grad or weight.requires_grad
            or (bias is not None and bias.requires_grad))):
        return plan.forward(x, alpha, weight, bias)
    return _c_apply(x, alpha, weight, bias, channels_last, plan)


@torch.library.custom_op("tilefuse::dyt", mutates_args=())
def dyt_op(x: torch.Tensor, alpha: torch.Tensor, weight: torch.Tensor,
           bias: Optional[torch.Tensor], channels_last: bool) -> torch.Tensor:
    return forward_impl(x, alpha, weight, bias, channels_last)


@dyt_op.register_fake
def _dyt_fake(x, alpha, weight, bias, channels_last):
    return launch.new_output(x, channels_last)


@torch.library.custom_op("tilefuse::dyt_backward", mutates_args=())
def dyt_backward_op(dy: torch.Tensor, x: torch.Tensor, alpha: torch.Tensor, weight: torch.Tensor,
                    bias: Optional[torch.Tensor], channels_last: bool
                    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Returns (dx, dalpha, dweight, dbias); dbias is an empty tensor when bias is None."""
    dx, dalpha, dweight, dbias = backward_impl(dy, x, alpha, weight, bias, channels_last)
    return dx, dalpha, dweight, weight.new_empty(0) if dbias is None else dbias


@dyt_backward_op.register_fake
def _dyt_backward_fake(dy, x, alpha, weight, bias, channels_last):
    dbias = weight.new_empty(0) if bias is None else torch.empty_like(
        bias, memory_format=torch.contiguous_format)
    return (launch.new_output(x, channels_last),
            torch.empty_like(alpha, memory_format=torch.contiguous_format),
            torch.empty_like(weight, memory_format=torch.contiguous_format), dbias)


def _backward(ctx, dy):
    if torch.is_grad_enabled():
        return _formula_grads(ctx, dy)
    x, alpha, weight, bias = ctx.saved_tensors
    dx, dalpha, dweight, dbias = dyt_backward_op(readable(dy), x, alpha, weight, bias, ctx.channels_last)
    return dx, dalpha, dweight, (dbias if bias is not None else None), None


torch.library.register_autograd("tilefuse::dyt", _backward, setup_context=_setup_context)
