"""DyT as torch.library custom ops (``tilefuse::dyt``, ``tilefuse::dyt_backward``) for traced
code, and an autograd.Function for eager calls; both run the same implementations.

The custom ops are opaque to torch.compile (fake impls give the output metadata), so
``torch.compile(fullgraph=True)`` traces through them without graph breaks. Which path runs is
decided when the op executes (policy.kernels_enabled): the Triton launchers, or the float32
reference formulas on devices where kernels cannot run (and under ``torch.vmap``, whose
batched tensors the kernels cannot take).

Double backward (``create_graph=True``): the backward then evaluates
``reference.dyt_backward_reference`` (differentiable PyTorch ops on the saved inputs, float32)
instead of the kernel, so second derivatives are exact.
"""

from __future__ import annotations

from typing import Optional

import torch

from ... import policy
from . import launch, reference


def _batched(*tensors) -> bool:
    """Whether any tensor is a torch.vmap BatchedTensor (DyTFunction's generated vmap rule runs
    forward and backward on those; the kernels take plain tensors)."""
    return any(t is not None and torch._C._functorch.is_batchedtensor(t) for t in tensors)


def forward_impl(x, alpha, weight, bias, channels_last: bool) -> torch.Tensor:
    """The forward both entry points run: the Triton launcher where kernels may run, else
    the float32 reference formulas."""
    if policy.kernels_enabled(x.device):
        return launch.forward(x, alpha, weight, bias, channels_last)
    y = launch.new_output(x, channels_last)
    y.copy_(reference.dyt_reference(x, alpha, weight, bias, channels_last=channels_last))
    return y


def backward_impl(dy, x, alpha, weight, bias, channels_last: bool):
    """(dx, dalpha, dweight, dbias or None), by the launcher or the reference formulas."""
    if policy.kernels_enabled(x.device):
        return launch.backward(dy, x, alpha, weight, bias, channels_last)
    dx_ref, dalpha, dweight, dbias = reference.dyt_backward_reference(
        dy, x, alpha, weight, bias, channels_last=channels_last)
    dx = launch.new_output(x, channels_last)
    dx.copy_(dx_ref)
    return dx, dalpha, dweight, dbias


def _setup_context(ctx, inputs, output):
    x, alpha, weight, bias, channels_last = inputs
    ctx.save_for_backward(x, alpha, weight, bias)
    ctx.channels_last = channels_last


def _formula_grads(ctx, dy):
    """create_graph=True: the backward formulas, differentiably (module docstring)."""
    x, alpha, weight, bias = ctx.saved_tensors
    return (*reference.dyt_backward_reference(dy, x, alpha, weight, bias, channels_last=ctx.channels_last), None)


class DyTFunction(torch.autograd.Function):
    """The eager entry point. torch.library's dispatch around a custom op costs tens of
    microseconds of host time per call (measured on the H200 host: benchmarks/results/), more
    than the kernel at small sizes, so eager calls take this plain autograd.Function; traced
    calls take the custom ops below. Both run forward_impl / backward_impl.

    New-style (forward without ctx, ``setup_context``), so torch.func transforms accept it;
    ``generate_vmap_rule``: vmap runs forward and backward on batched tensors, which take the
    reference formulas (``_batched``)."""

    generate_vmap_rule = True

    @staticmethod
    def forward(x, alpha, weight, bias, channels_last):
        if _batched(x, alpha, weight, bias):
            return reference.dyt_reference(x, alpha, weight, bias, channels_last=channels_last)
        return forward_impl(x, alpha, weight, bias, channels_last)

    setup_context = staticmethod(_setup_context)

    @staticmethod
    def backward(ctx, dy):
        if torch.is_grad_enabled():
            return _formula_grads(ctx, dy)
        x, alpha, weight, bias = ctx.saved_tensors
        if _batched(dy, x, alpha, weight, bias):
            grads = reference.dyt_backward_reference(dy, x, alpha, weight, bias, channels_last=ctx.channels_last)
        else:
            grads = backward_impl(dy, x, alpha, weight, bias, ctx.channels_last)
        return *grads, None


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
    dx, dalpha, dweight, dbias = dyt_backward_op(dy, x, alpha, weight, bias, ctx.channels_last)
    return dx, dalpha, dweight, (dbias if bias is not None else None), None


torch.library.register_autograd("tilefuse::dyt", _backward, setup_context=_setup_context)
