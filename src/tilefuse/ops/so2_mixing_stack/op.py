"""Autograd wiring of so2_mixing_stack: Triton forward, Triton relay backward.

Double backward (``create_graph=True``, force-loss training) goes through the differentiable
reference: the backward recomputes the forward with autograd and differentiates it, so second
derivatives are exact; no kernel runs there.
"""

from __future__ import annotations

import torch

from ... import policy
from . import configs, launch
from .reference import So2Dims, so2_stack_reference


def backward_config(d: So2Dims, dtype: torch.dtype, n_edges: int, n_focus: int, n_layers: int,
                    weight_grads: bool) -> configs.So2Config:
    """The backward route and tiles. Fused only when every guard holds: level >= 2, the tuning
    table holds a fused winner for (lmax, focus_dim, dtype) on this GPU, fp32, focus_dim a
    power of two in [16, 64], and no weight gradients (they need gz/gq in memory). Double
    backward never gets here (see So2StackFunction.backward). Everything else: the relay."""
    relay = configs.heuristic(d.lmax, d.focus_dim)
    if (weight_grads or policy.get_level() < 2
            or not configs.fused_supported(d.focus_dim, dtype == torch.float32)):
        return relay
    from ...tuning import lookup_config
    from .tune import So2Problem
    tuned = lookup_config("so2_mixing_stack", So2Problem(d.lmax, d.focus_dim, 4, n_edges, n_focus, n_layers))
    return tuned if tuned is not None and tuned.fused else relay


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
        if torch.is_grad_enabled():  # create_graph: differentiate the reference, to any order
            inputs = (u0, alpha, w0_all, w1_all, gw_all)   # the saved originals, still in the graph
            need = [i for i, t in enumerate(inputs) if ctx.needs_input_grad[i]]
            with torch.enable_grad():
                out = so2_stack_reference(*inputs, lmax=d.lmax, focus_dim=d.focus_dim, apply_alpha=apply_alpha)
                got = torch.autograd.grad(out, [inputs[i] for i in need], grad_out, create_graph=True,
                                          allow_unused=True)
            grads = [None] * 5
            for i, g in zip(need, got):
                grads[i] = torch.zeros_like(inputs[i]) if g is None else g
            return (*grads, None, None, None)
        weight_grads = any(ctx.needs_input_grad[2:5])
        cfg = backward_config(d, grad_out.dtype, x_local.shape[0], x_local.shape[1], w0_all.shape[0], weight_grads)
        grad_u0, grad_alpha, dws = launch.backward(
            grad_out, x_local, z_all, u_final, alpha, w0_all, w1_all, gw_all, d, apply_alpha, weight_grads,
            config=cfg)
        dw0, dw1, dgw = dws if dws is not None else (None, None, None)
        return grad_u0, grad_alpha, dw0, dw1, dgw, None, None, None


def so2_stack_apply(u0, alpha, w0_all, w1_all, gw_all, *, lmax, focus_dim, apply_alpha):
    return So2StackFunction.apply(u0, alpha, w0_all, w1_all, gw_all, lmax, focus_dim, apply_alpha)
