"""Autograd helpers shared by the op families."""

from __future__ import annotations

import torch

_is_functorch_batched = torch._C._functorch.is_batchedtensor
_is_legacy_batched = getattr(torch._C._functorch, "is_legacy_batchedtensor", lambda t: False)


def is_batched(t) -> bool:
    """Whether ``t`` is a batched tensor: torch.vmap's, or the older vmap's that
    ``autograd.grad(is_grads_batched=True)`` and ``jacobian(vectorize=True)`` hand a backward.
    The Triton kernels take plain tensors (they read memory); batched ones take the reference."""
    return _is_functorch_batched(t) or _is_legacy_batched(t)


def batched_at_any_level(t) -> bool:
    """Whether ``t`` is batched by a vmap at any level of torch.func's wrappers (grad's
    wrapper around a vmap's batched tensor included)."""
    functorch = torch._C._functorch
    while True:
        if is_batched(t):
            return True
        if not functorch.is_functorch_wrapped_tensor(t):
            return False
        t = functorch.get_unwrapped(t)


def any_batched(*tensors) -> bool:
    """Whether any of ``tensors`` (None entries allowed) is batched (``is_batched``)."""
    return any(t is not None and is_batched(t) for t in tensors)


def create_graph_grads(ctx, forward, inputs, grad_out) -> list:
    """Gradients for a ``create_graph`` backward: differentiate ``forward(*inputs)`` (a
    differentiable PyTorch path) on the saved originals, which are still in the graph, so
    higher derivatives are exact. Returns one entry per input: None where the input needs no
    gradient, zeros where ``forward`` does not use it (also where it uses none of the inputs
    that need one, so its output has no graph: so2's alpha with ``apply_alpha=False``)."""
    need = [i for i, t in enumerate(inputs) if t is not None and ctx.needs_input_grad[i]]
    with torch.enable_grad():
        out = forward(*inputs)
        got = (torch.autograd.grad(out, [inputs[i] for i in need], grad_out, create_graph=True, allow_unused=True)
               if out.requires_grad else [None] * len(need))
    grads = [None] * len(inputs)
    for i, g in zip(need, got):
        grads[i] = torch.zeros_like(inputs[i]) if g is None else g
    return grads
