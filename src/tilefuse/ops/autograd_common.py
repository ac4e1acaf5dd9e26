"""Autograd helpers shared by the op families."""

from __future__ import annotations

import torch


def create_graph_grads(ctx, forward, inputs, grad_out) -> list:
    """Gradients for a ``create_graph`` backward: differentiate ``forward(*inputs)`` (a
    differentiable PyTorch path) on the saved originals, which are still in the graph, so
    higher derivatives are exact. Returns one entry per input: None where the input needs no
    gradient, zeros where ``forward`` does not use it."""
    need = [i for i, t in enumerate(inputs) if t is not None and ctx.needs_input_grad[i]]
    with torch.enable_grad():
        out = forward(*inputs)
        got = torch.autograd.grad(out, [inputs[i] for i in need], grad_out, create_graph=True, allow_unused=True)
    grads = [None] * len(inputs)
    for i, g in zip(need, got):
        grads[i] = torch.zeros_like(inputs[i]) if g is None else g
    return grads
