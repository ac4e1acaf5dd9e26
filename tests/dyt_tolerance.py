"""Error bounds for DyT against a float64 reference, derived from the arithmetic.

u(dtype) is the unit roundoff (half an ulp at 1): 2**-24 fp32, 2**-8 bf16, 2**-11 fp16.
Rounding to a dtype is within u |v| for normal results, and within eta(dtype), half the
smallest subnormal, for subnormal ones (fp16 dx reaches them: its normal range ends at 6e-5).

- tanh_f32 is within 3 ulp of tanh (polynomial below 0.55, 1 - 2/(exp(2|u|)+1) above), the
  products and the bias add add a few more roundings: the float32 value of y is within
  8 u32 (|w t| + |b|) of the exact y. Rounding to the output dtype adds u_out |y|.
- dx = alpha * dy * w * (1 - t^2): 1 - t^2 is computed as in eager PyTorch; an error of k ulp
  in t moves it by about 2k u32 t^2 <= 6 u32 absolute, so |dx error| <= 16 u32 |alpha dy w|
  plus u_out |dx|.
- Parameter gradients are float32 sums of n terms. Each term carries a few roundings
  (8 u32 |term|); the summation error of n terms in any order is, for random-sign data,
  about sqrt(n) u32 sum|term| (STYLE.md: ~sqrt(M) ulp); we allow 4 sqrt(n) + 8 of it.
  Rounding to the parameter dtype adds u_param |ref|.
"""

import math

import torch

U = {torch.float32: 2.0 ** -24, torch.bfloat16: 2.0 ** -8, torch.float16: 2.0 ** -11,
     torch.float64: 2.0 ** -53}
U32 = U[torch.float32]
ETA = {torch.float32: 2.0 ** -150, torch.bfloat16: 2.0 ** -134, torch.float16: 2.0 ** -25,
       torch.float64: 2.0 ** -1075}


def assert_within(name, got, ref, bound):
    got = got.double()
    assert got.shape == ref.shape, f"{name}: shape {tuple(got.shape)} != {tuple(ref.shape)}"
    assert not torch.isnan(got).any(), f"{name}: NaN in result"
    err = (got - ref).abs()
    bad = err > bound
    if bad.any():
        i = int(torch.nonzero(bad.flatten())[0])
        raise AssertionError(
            f"{name}: {int(bad.sum())} of {err.numel()} elements out of bound; first at flat index "
            f"{i}: got {got.flatten()[i].item()!r}, ref {ref.flatten()[i].item()!r}, "
            f"err {err.flatten()[i].item():.3e} > bound {bound.flatten()[i].item():.3e}")


def y_bound(y_ref, wt_abs, b_abs, out_dtype):
    return U[out_dtype] * y_ref.abs() + ETA[out_dtype] + 8 * U32 * (wt_abs + b_abs)


def dx_bound(dx_ref, alpha_dy_w_abs, out_dtype):
    return U[out_dtype] * dx_ref.abs() + ETA[out_dtype] + 16 * U32 * alpha_dy_w_abs


def sum_bound(ref, abs_sum, n_terms, out_dtype):
    return U[out_dtype] * ref.abs() + ETA[out_dtype] + (4 * math.sqrt(max(n_terms, 1)) + 8) * U32 * abs_sum
