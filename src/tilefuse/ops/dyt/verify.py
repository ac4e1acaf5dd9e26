"""Error bounds for DyT against a float64 reference, derived from the arithmetic, and the
comparison used by the tests, ``tilefuse check`` and the tuner.

u(dtype) is the unit roundoff (half an ulp at 1): 2**-24 fp32, 2**-8 bf16, 2**-11 fp16.
Rounding to a dtype is within u |v| for normal results, and within eta(dtype), half the
smallest subnormal, for subnormal ones (fp16 dx reaches them: its normal range ends at 6e-5).

- tanh_f32 is within 3 ulp of tanh (polynomial below 0.75, sign(u) (1 - 2/(exp(2|u|)+1)) above); the
  products and the bias add add a few more roundings: the float32 value of y is within
  8 u32 (|w t| + |b|) of the exact y. Rounding to the output dtype adds u_out |y|.
- dx = alpha * dy * w * (1 - t^2): 1 - t^2 is computed as in eager PyTorch; an error of k ulp
  in t moves it by about 2k u32 t^2 <= 6 u32 absolute, so |dx error| <= 16 u32 |alpha dy w|
  plus u_out |dx|.
- Parameter gradients are float32 sums of n terms. Each term carries a few roundings
  (8 u32 |term|); the summation error of n terms in any order is, for random-sign data,
  about sqrt(n) u32 sum|term| (STYLE.md: ~sqrt(M) ulp); we allow 4 sqrt(n) + 8 of it.
  Rounding to the parameter dtype adds u_param |ref|.
- dalpha's terms x dy w (1 - t^2) also carry 1 - t^2's absolute error (dx's note: <= 6 u32,
  plus its roundings), which is not small against the term where t^2 is near 1 (|alpha x| >
  ~4: 1 - t^2 < 1e-3, and below u32 past 9): each term is within 16 u32 |x dy w| of its exact
  value besides the relative roundings, a sum of such terms within 16 u32 sum |x dy w|.
  dweight's terms dy t and dbias's dy have no such difference.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math

import torch

from ...utils import SharedOverride
from .reference import _param_view, _reduce_to_channels, dyt_backward_reference, dyt_reference

U = {torch.float32: 2.0 ** -24, torch.bfloat16: 2.0 ** -8, torch.float16: 2.0 ** -11,
     torch.float64: 2.0 ** -53}
ETA = {torch.float32: 2.0 ** -150, torch.bfloat16: 2.0 ** -134, torch.float16: 2.0 ** -25,
       torch.float64: 2.0 ** -1075}
U32 = U[torch.float32]


@dataclasses.dataclass
class Comparison:
    """One output against its reference: the worst error as a fraction of its bound (<= 1
    passes), the normwise relative error, and a description of the first failure."""

    name: str
    worst_over_bound: float
    rel_err: float
    first_failure: str = ""

    @property
    def ok(self) -> bool:
        return self.worst_over_bound <= 1.0


def compare(name: str, got: torch.Tensor, ref: torch.Tensor, bound: torch.Tensor) -> Comparison:
    got = got.detach().double().cpu()
    if got.shape != ref.shape:
        return Comparison(name, math.inf, math.inf, f"shape {tuple(got.shape)} != {tuple(ref.shape)}")
    # NaN where the reference has NaN matches it, and an infinity the same infinity (inf - inf
    # would be NaN); NaN on one side only is out of any bound
    both = (torch.isnan(got) & torch.isnan(ref)) | (got == ref)
    diff = torch.where(both, torch.zeros_like(got), got - ref)
    err = diff.abs()
    ratio = torch.where(torch.isnan(got) ^ torch.isnan(ref), torch.full_like(err, math.inf),
                        torch.where(err == 0, torch.zeros_like(err), err / bound))
    worst = float(ratio.max()) if ratio.numel() else 0.0
    if math.isnan(worst):   # no verdict (an error over an infinite or NaN bound) is a failure, and says why
        i = int(torch.argmax(torch.isnan(ratio).flatten().to(torch.uint8)))
        return Comparison(name, math.inf, math.inf, f"error over bound is NaN at flat index {i}: got "
                          f"{got.flatten()[i].item()!r}, ref {ref.flatten()[i].item()!r}, bound "
                          f"{bound.flatten()[i].item():.3e}")
    denom = float(torch.where(torch.isnan(ref), torch.zeros_like(ref), ref).norm())
    rel = float(torch.nan_to_num(diff.norm(), nan=math.inf))
    rel = rel / denom if denom else (float(err.amax()) if err.numel() else 0.0)
    first = ""
    if worst > 1.0:
        i = int(torch.argmax(ratio.flatten()))
        first = (f"{int((ratio > 1).sum())} of {ratio.numel()} out of bound; worst at flat index {i}: got "
                 f"{got.flatten()[i].item()!r}, ref {ref.flatten()[i].item()!r}, bound "
                 f"{bound.flatten()[i].item():.3e}")
    return Comparison(name, worst, rel, first)


def _sum_bound(ref, abs_sum, n_terms, dtype):
    return U[dtype] * ref.abs() + ETA[dtype] + (4 * math.sqrt(max(n_terms, 1)) + 8) * U32 * abs_sum


def compare_to_reference(x, alpha, weight, bias, dy, channels_last, outs) -> list[Comparison]:
    """Compare ``outs = (y, dx, dalpha, dweight, dbias)`` (dx.. may be None for forward only)
    with the float64 reference within the bounds derived above. Also checks the dtype
    contract: a dtype mismatch is a failure."""
    y, dx, dalpha, dweight, dbias = outs
    d = lambda t: None if t is None else t.detach().double().cpu()  # noqa: E731
    x64, a64, w64, b64 = d(x), d(alpha), d(weight), d(bias)
    t = torch.tanh(a64 * x64)
    wv = _param_view(w64, x64, channels_last)
    results = []

    def dtype_ok(name, got, want):
        if got is not None and got.dtype != want:
            results.append(Comparison(name + ".dtype", math.inf, math.inf, f"{got.dtype} != {want}"))

    y_ref = dyt_reference(x64, a64, w64, b64, channels_last=channels_last, compute_dtype=torch.float64)
    b_abs = 0 if b64 is None else _param_view(b64, x64, channels_last).abs()
    dtype_ok("y", y, x.dtype)
    results.append(compare("y", y, y_ref, U[x.dtype] * y_ref.abs() + ETA[x.dtype]
                           + 8 * U32 * ((wv * t).abs() + b_abs)))
    if dx is None:
        return results

    dy64 = d(dy)
    dx_ref, da_ref, dw_ref, db_ref = dyt_backward_reference(
        dy64, x64, a64, w64, b64, channels_last=channels_last, compute_dtype=torch.float64)
    dtype_ok("dx", dx, x.dtype)
    dtype_ok("dalpha", dalpha, alpha.dtype)
    dtype_ok("dweight", dweight, weight.dtype)
    results.append(compare("dx", dx, dx_ref, U[x.dtype] * dx_ref.abs() + ETA[x.dtype]
                           + 16 * U32 * (a64 * dy64 * wv).abs()))
    g = dy64 * wv * (1 - t * t)
    numel = x.numel()
    per_channel = numel // max(weight.numel(), 1)
    # 1 - t^2's absolute error in each term (module docstring), as dx's bound allows for it
    results.append(compare("dalpha", dalpha.reshape(da_ref.shape), da_ref,
                           _sum_bound(da_ref, (x64 * g).abs().sum(), numel, alpha.dtype)
                           + 16 * U32 * (x64 * dy64 * wv).abs().sum()))
    results.append(compare("dweight", dweight, dw_ref, _sum_bound(
        dw_ref, _reduce_to_channels((dy64 * t).abs(), channels_last), per_channel, weight.dtype)))
    if bias is not None:
        dtype_ok("dbias", dbias, bias.dtype)
        results.append(compare("dbias", dbias, db_ref, _sum_bound(
            db_ref, _reduce_to_channels(dy64.abs(), channels_last), per_channel, bias.dtype)))
    return results


@contextlib.contextmanager
def poisoned():
    """Every y/dx the launchers allocate starts as NaN, and so does their float32 scratch (fresh
    each launch: none is reused meanwhile), and every other allocation (the parameters'
    gradients: tuning.sweep.poisoned_allocations), so an element no program wrote shows up as
    a failure."""
    from ...tuning.sweep import poisoned_allocations
    with _poison_launches(), poisoned_allocations():
        yield


def _poison_apply():
    from . import launch
    saved = (launch.POISON_OUTPUTS, launch.POISON_SCRATCH)
    launch.POISON_OUTPUTS = launch.POISON_SCRATCH = True
    return saved


def _poison_restore(saved):
    from . import launch
    launch.POISON_OUTPUTS, launch.POISON_SCRATCH = saved


# the launchers' flags, held while any poisoned() block is open in any thread
_poison_launches = SharedOverride(_poison_apply, _poison_restore)
