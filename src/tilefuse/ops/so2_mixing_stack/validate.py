"""Argument checks of so2_mixing_stack: TypeError / ValueError naming the argument.

Shapes and dtypes only: no value is read, so the checks never synchronize with the device and
trace cleanly under torch.compile. What they cannot see, the caller keeps:

- ``alpha`` must be positive wherever ``apply_alpha`` is set. The backward recovers
  ``grad_alpha = sum_row(grad_out * x_local) / alpha`` from the output instead of saving the
  unscaled one, so a zero alpha gives NaN (0/0) and a tiny one loses precision.
- Values are finite (a NaN propagates; it is never cleaned up).

Decisions:

- ``alpha`` is checked (tensor, dtype, device, shape (E, F)) whether or not ``apply_alpha`` is
  set: it is a tensor of the op's signature that every path receives, and one rule for both
  settings is easier to keep than a hole that lets a wrong-shaped tensor through on one side.
  Without alpha weights, pass ``u0.new_ones(E, F)`` (``SO2MixingStack`` does that for you).
- E (edges) may be 0: the result is empty and the gradients are empty or zero. F (focus
  streams) must be >= 1: it is a model dimension shared with every weight, not a batch size,
  so F = 0 can only be a construction mistake.
- All five tensors share one dtype: float32, bfloat16, float16 or float64 (float64 for the
  reference and for checks; which dtypes reach Triton kernels is the dispatcher's business).
- Strides are not checked: the launchers own the layouts they read.
"""

from __future__ import annotations

import torch

from ...utils import check_bool, check_tensor
from .reference import So2Dims

FLOAT_DTYPES = (torch.float32, torch.bfloat16, torch.float16, torch.float64)
_DTYPE_NAMES = "float32, bfloat16, float16 or float64"
_OP = "so2_mixing_stack"


def _check_int(name: str, value, minimum: int) -> None:
    # bool is an int subclass; lmax=True is a mistake, not 1.
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{_OP}: {name} must be an int, got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{_OP}: {name} must be >= {minimum}, got {value}")


def _check_float(name: str, t) -> None:
    check_tensor(_OP, name, t)
    if t.dtype not in FLOAT_DTYPES:
        raise TypeError(f"{_OP}: {name} must be {_DTYPE_NAMES}, got {t.dtype}")


def _check_shape(name: str, t: torch.Tensor, expected: tuple, meaning: str) -> None:
    if tuple(t.shape) != expected:
        raise ValueError(f"{_OP}: {name} must have shape {meaning} = {expected}, got {tuple(t.shape)}")


def validate(u0, alpha, w0_all, w1_all, gw_all, *, lmax, focus_dim, apply_alpha) -> None:
    """Raise TypeError (wrong kind or dtype) or ValueError (wrong value, shape or device),
    naming the offending argument. Returns None when the arguments are consistent.

    Expected (Cf = focus_dim, L = lmax, M0 = (L+1) Cf, M1 = 2 L Cf, LG = L Cf):
    u0 (F, E, (3L+1) Cf); alpha (E, F); w0_all (NL, F, M0, M0); w1_all (NL, F, M1, M1);
    gw_all (NL-1, F, Cf, LG) with NL >= 2; lmax >= 1, focus_dim >= 1 ints; apply_alpha a bool.
    """
    _check_int("lmax", lmax, 1)
    _check_int("focus_dim", focus_dim, 1)
    check_bool(_OP, "apply_alpha", apply_alpha)

    # u0 first: it fixes F and E, and the others are checked against it.
    d = So2Dims(lmax, focus_dim)
    row, m0, m1, lg = d.row, d.m0, d.m1, d.lg
    _check_float("u0", u0)
    if u0.dim() != 3:
        raise ValueError(f"{_OP}: u0 must be 3-D (F, E, ROW), got shape {tuple(u0.shape)}")
    n_focus, n_edges, u_row = u0.shape
    if u_row != row:
        raise ValueError(f"{_OP}: u0's last dimension must be ROW = (3 lmax + 1) focus_dim = {row} "
                         f"(lmax={lmax}, focus_dim={focus_dim}), got shape {tuple(u0.shape)}")
    if n_focus < 1:
        raise ValueError(f"{_OP}: u0 must have at least one focus stream (F = u0.shape[0] >= 1), "
                         f"got shape {tuple(u0.shape)}")
    for name, t in (("alpha", alpha), ("w0_all", w0_all), ("w1_all", w1_all), ("gw_all", gw_all)):
        _check_float(name, t)
        if t.dtype != u0.dtype:
            raise TypeError(f"{_OP}: {name} is {t.dtype} but u0 is {u0.dtype}; "
                            "all five tensors must share one dtype")
        if t.device != u0.device:
            raise ValueError(f"{_OP}: {name} is on {t.device} but u0 is on {u0.device}")

    _check_shape("alpha", alpha, (n_edges, n_focus), "(E, F)")

    if w0_all.dim() != 4:
        raise ValueError(f"{_OP}: w0_all must be 4-D (NL, F, M0, M0), got shape {tuple(w0_all.shape)}")
    n_layers = w0_all.shape[0]
    if n_layers < 2:
        raise ValueError(f"{_OP}: w0_all must hold NL >= 2 layers (at least one gated layer and the "
                         f"final one), got shape {tuple(w0_all.shape)}")
    _check_shape("w0_all", w0_all, (n_layers, n_focus, m0, m0), "(NL, F, M0, M0)")
    _check_shape("w1_all", w1_all, (n_layers, n_focus, m1, m1), "(NL, F, M1, M1)")
    _check_shape("gw_all", gw_all, (n_layers - 1, n_focus, focus_dim, lg), "(NL-1, F, focus_dim, lmax*focus_dim)")
