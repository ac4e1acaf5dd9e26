"""Autograd wiring of so2_mixing_stack: Triton forward, Triton relay backward.

Double backward (``create_graph=True``, force-loss training) goes through the differentiable
reference: the backward recomputes the forward with autograd and differentiates it, so second
derivatives are exact; no kernel runs there.
"""

from __future__ import annotations

import torch

from . import launch
from .reference import So2Dims, so2_stack_reference


class So2StackFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, u0, alpha, w0_all, w1_all, gw_all, lmax, focus_dim, apply_alpha):
        d = So2Dims(lmax, focus_dim)
        x_local, z_all, u_final = launch.forward(u0, alpha, w0_all, w1_all, gw_all, d, apply_alpha)
        ctx.save_for_backward(u0, alpha, w0_all, w1_all, gw_all, x_local, z_all, u_final)
        ctx.dims, ctx.apply_alpha = d, apply_alpha
        return x_local

    @staticmethod
    def backward(ctx, grad_out):
        u0, alpha, w0_all, w1_all, gw_all, x_local, z_all, u_final = ctx.saved_tensors
        d, apply_alpha = ctx.dims, ctx.apply_alpha
        if torch.is_grad_enabled():  # create_graph: a differentiable path
            inputs = [t.detach().requires_grad_(True) for t in (u0, alpha, w0_all, w1_all, gw_all)]
            with torch.enable_grad():
                out = so2_stack_reference(*inputs, lmax=d.lmax, focus_dim=d.focus_dim, apply_alpha=apply_alpha)
                grads = torch.autograd.grad(out, inputs, grad_out, create_graph=True, allow_unused=True)
            return (*grads, None, None, None)
        weight_grads = any(ctx.needs_input_grad[2:5])
        grad_u0, grad_alpha, dws = launch.backward(
            grad_out, x_local, z_all, u_final, alpha, w0_all, w1_all, gw_all, d, apply_alpha, weight_grads)
        dw0, dw1, dgw = dws if dws is not None else (None, None, None)
        return grad_u0, grad_alpha if apply_alpha else None, dw0, dw1, dgw, None, None, None


def so2_stack_apply(u0, alpha, w0_all, w1_all, gw_all, *, lmax, focus_dim, apply_alpha):
    return So2StackFunction.apply(u0, alpha, w0_all, w1_all, gw_all, lmax, focus_dim, apply_alpha)
