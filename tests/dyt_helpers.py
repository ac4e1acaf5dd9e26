"""Shared helpers for the DyT tests: inputs, a poisoned run through the public API, and the
float64 reference comparison (bounds derived in tilefuse.ops.dyt.verify)."""

import math

import torch

import tilefuse
from tilefuse.ops.dyt.verify import compare_to_reference, poisoned

DTYPE_NAMES = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}


def poison_outputs():
    """Every y/dx the launchers allocate starts as NaN, and so does their float32 scratch."""
    return poisoned()


def make_inputs(shape, dtype, param_dtype, bias, channels_last, device, alpha=None, seed=None):
    """Fresh random inputs (a new seed per call unless given): x, alpha, weight, bias, dy. The
    seed is drawn from a generator of its own (torch.seed() would reseed the global one that
    later tests in the worker draw from) and printed: pytest shows it with a failure."""
    if seed is None:
        seed = torch.Generator().seed() % 2**31
    print(f"dyt_helpers.make_inputs{(tuple(shape), dtype, param_dtype, bias, channels_last)}: seed {seed}")
    g = torch.Generator().manual_seed(seed)
    c = shape[-1] if channels_last else shape[1]
    x = (torch.randn(shape, generator=g) * 2).to(dtype).to(device)
    a = torch.tensor([alpha if alpha is not None else 0.3 + torch.rand(1, generator=g).item()])
    w = torch.randn(c, generator=g)
    b = torch.randn(c, generator=g) if bias else None
    dy = torch.randn(shape, generator=g).to(dtype).to(device)
    cast = lambda t: None if t is None else t.to(param_dtype).to(device).requires_grad_(True)  # noqa: E731
    return x.requires_grad_(True), cast(a), cast(w), cast(b), dy


def run(x, alpha, weight, bias, dy, channels_last):
    y = tilefuse.dyt(x, alpha, weight, bias, channels_last=channels_last)
    y.backward(dy)
    return y.detach(), x.grad, alpha.grad, weight.grad, None if bias is None else bias.grad


def check_against_reference(x, alpha, weight, bias, dy, channels_last, outs):
    failures = [f"{c.name}: {c.first_failure} (worst error {c.worst_over_bound:.2f}x its bound)"
                for c in compare_to_reference(x, alpha, weight, bias, dy, channels_last, outs) if not c.ok]
    assert not failures, "\n".join(failures)


def case_id(shape, dtype, param_dtype, bias, channels_last=True):
    dims = "x".join(str(s) for s in shape)
    layout = "" if channels_last else "-cfirst"
    return (f"{dims}{layout}-{DTYPE_NAMES[dtype]}-{DTYPE_NAMES[param_dtype]}params"
            f"-{'bias' if bias else 'nobias'}")


def rows_for(width):
    """Ragged row counts: not multiples of any block, and enough rows for several programs."""
    return max(3, min(37, int(math.ceil(20000 / width)) | 1))
