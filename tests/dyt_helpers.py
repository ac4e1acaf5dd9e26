"""Shared helpers for the DyT tests: inputs, a poisoned run through the public API, and the
float64 reference comparison with the bounds of dyt_tolerance.py."""

import math

import torch

import tilefuse
from tilefuse.ops.dyt import launch
from tilefuse.ops.dyt.reference import dyt_backward_reference, dyt_reference

from dyt_tolerance import U32, assert_within, dx_bound, sum_bound, y_bound

DTYPE_NAMES = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}


def poison_outputs(monkeypatch):
    """Every y/dx the launchers allocate starts as NaN, and so does their float32 scratch."""
    real = launch.new_output

    def poisoned(x, channels_last):
        return real(x, channels_last).fill_(float("nan"))

    monkeypatch.setattr(launch, "new_output", poisoned)
    monkeypatch.setattr(launch, "POISON_SCRATCH", True)


def make_inputs(shape, dtype, param_dtype, bias, channels_last, device, alpha=None, seed=None):
    g = torch.Generator().manual_seed(seed if seed is not None else torch.seed() % 2**31)
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


def _pview(p, x, channels_last):
    return p if channels_last else p.reshape((1, -1) + (1,) * (x.dim() - 2))


def check_against_reference(x, alpha, weight, bias, dy, channels_last, outs):
    """Compare (y, dx, dalpha, dweight, dbias) with the float64 reference within the derived
    bounds, and check every dtype of the contract."""
    y, dx, dalpha, dweight, dbias = outs
    d = lambda t: None if t is None else t.detach().double().cpu()  # noqa: E731
    x64, a64, w64, b64, dy64 = d(x), d(alpha), d(weight), d(bias), d(dy)
    y_ref = dyt_reference(x64, a64, w64, b64, channels_last=channels_last, compute_dtype=torch.float64)
    dx_ref, da_ref, dw_ref, db_ref = dyt_backward_reference(
        dy64, x64, a64, w64, b64, channels_last=channels_last, compute_dtype=torch.float64)

    assert y.dtype == x.dtype and dx.dtype == x.dtype
    assert dalpha.dtype == alpha.dtype and dweight.dtype == weight.dtype
    assert y.shape == x.shape and dx.shape == x.shape and dalpha.shape == alpha.shape
    if bias is not None:
        assert dbias.dtype == bias.dtype

    t = torch.tanh(a64 * x64)
    wv, bv = _pview(w64, x64, channels_last), None if b64 is None else _pview(b64, x64, channels_last)
    assert_within("y", y.cpu(), y_ref, y_bound(y_ref, (wv * t).abs(), 0 if bv is None else bv.abs(), x.dtype))
    assert_within("dx", dx.cpu(), dx_ref, dx_bound(dx_ref, (a64 * dy64 * wv).abs(), x.dtype))

    numel = x.numel()
    per_channel = numel // max(weight.numel(), 1)
    g = dy64 * wv * (1 - t * t)
    assert_within("dalpha", dalpha.cpu(), da_ref,
                  sum_bound(da_ref, (x64 * g).abs().sum().reshape(da_ref.shape) + 8 * U32, numel, alpha.dtype))
    red = (lambda v: v.reshape(-1, v.shape[-1]).sum(0)) if channels_last else \
        (lambda v: v.sum([0] + list(range(2, v.dim()))))
    assert_within("dweight", dweight.cpu(), dw_ref,
                  sum_bound(dw_ref, red((dy64 * t).abs()), per_channel, weight.dtype))
    if bias is not None:
        assert_within("dbias", dbias.cpu(), db_ref,
                      sum_bound(db_ref, red(dy64.abs()), per_channel, bias.dtype))


def case_id(shape, dtype, param_dtype, bias, channels_last=True):
    dims = "x".join(str(s) for s in shape)
    layout = "" if channels_last else "-cfirst"
    return (f"{dims}{layout}-{DTYPE_NAMES[dtype]}-{DTYPE_NAMES[param_dtype]}params"
            f"-{'bias' if bias else 'nobias'}")


def rows_for(width):
    """Ragged row counts: not multiples of any block, and enough rows for several programs."""
    return max(3, min(37, int(math.ceil(20000 / width)) | 1))
