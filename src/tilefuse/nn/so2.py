"""``SO2MixingStack``: the gated SO(2) mixing stack as a module holding its weights."""

from __future__ import annotations

import math

import torch
from torch import nn

from ..ops.so2_mixing_stack import so2_mixing_stack
from ..ops.so2_mixing_stack.reference import So2Dims
from ..ops.so2_mixing_stack.validate import FLOAT_DTYPES
from ..utils import FxProxy, check_bool, check_dtype_arg


class SO2MixingStack(nn.Module):
    """SO(2)-equivariant gated mixing stack (SeZM layout; docs/specs/so2_mixing_stack.md).

    ``n_layers - 1`` gated residual layers, then one linear residual layer, per focus stream;
    optionally each (edge, focus) row scaled by ``alpha``.

    Args:
        lmax: L >= 1, the highest degree (mmax = 1).
        focus_dim: Cf >= 1, the channel width of one sub-tile.
        n_focus: F >= 1, the number of focus streams.
        n_layers: NL >= 2, mixing layers including the final linear one (typically 3).
        apply_alpha: scale the output by ``alpha`` (E, F).

    Shapes (M0 = (L+1) Cf, M1 = 2 L Cf, ROW = (3L+1) Cf, E edges, E may be 0):
        forward(u0 (F, E, ROW), alpha (E, F)) -> x_local (E, F, ROW), in u0's dtype.

    Parameters (applied as ``u @ W``, (in, out)):
        ``w0_all`` (NL, F, M0, M0) m=0 weights; ``w1_all`` (NL, F, M1, M1) |m|=1 weights;
        ``gw_all`` (NL-1, F, Cf, L Cf) gate projections (no bias).

    Initialisation (``reset_parameters``): every weight ~ N(0, 1/fan_in), fan_in = M0, M1 and Cf
    respectively, so each pre-activation has about its input's variance. The residual stack
    still grows: with unit-variance u0 the output std measured ~1.85 at NL = 3 and ~2.5 at
    NL = 5 (lmax 2..6, Cf 32..64). ``w1_all`` is drawn in the complex-multiplication pattern
    ``[[A, B], [-B, A]]`` over the (m=-1, m=+1) stripes (A, B of shape (L Cf, L Cf)), which
    commutes with a rotation about the edge axis, so a freshly initialised module is exactly
    SO(2)-equivariant. It is still one dense parameter, as the kernels read it; training
    updates it densely, and a model that must stay equivariant keeps its own (W_u, W_v) and
    calls ``tilefuse.so2_mixing_stack`` with the assembled ``w1_all``.

    ``alpha`` must be positive where ``apply_alpha`` is set (the backward divides by it).
    Without ``apply_alpha``, ``alpha`` may be omitted. The execution path (reference or Triton
    kernels, relay or fused backward) is decided on every call by the policy level in force
    (``tilefuse.level``) and the tuning table, not at construction.

    Example:
        >>> m = SO2MixingStack(lmax=3, focus_dim=32, n_focus=2, n_layers=3)
        >>> u0 = torch.randn(2, 1000, 320)                # (F, E, ROW)
        >>> alpha = torch.softmax(torch.randn(1000, 2), -1)  # (E, F), positive
        >>> x_local = m(u0, alpha)                          # (1000, 2, 320)
    """

    def __init__(self, lmax: int, focus_dim: int, n_focus: int, n_layers: int, *,
                 apply_alpha: bool = True, device=None, dtype=None):
        super().__init__()
        for name, value, minimum in (("lmax", lmax, 1), ("focus_dim", focus_dim, 1),
                                     ("n_focus", n_focus, 1), ("n_layers", n_layers, 2)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"SO2MixingStack: {name} must be an int >= {minimum}, got {type(value).__name__}")
            if value < minimum:
                raise ValueError(f"SO2MixingStack: {name} must be an int >= {minimum}, got {value!r}")
        check_bool("SO2MixingStack", "apply_alpha", apply_alpha)
        check_dtype_arg("SO2MixingStack", dtype, FLOAT_DTYPES)
        self.lmax, self.focus_dim, self.n_focus, self.n_layers = lmax, focus_dim, n_focus, n_layers
        self.apply_alpha = apply_alpha
        d = So2Dims(lmax, focus_dim)
        factory = {"device": device, "dtype": dtype}
        self.w0_all = nn.Parameter(torch.empty(n_layers, n_focus, d.m0, d.m0, **factory))
        self.w1_all = nn.Parameter(torch.empty(n_layers, n_focus, d.m1, d.m1, **factory))
        self.gw_all = nn.Parameter(torch.empty(n_layers - 1, n_focus, focus_dim, d.lg, **factory))
        self.reset_parameters()

    @property
    def row(self) -> int:
        return So2Dims(self.lmax, self.focus_dim).row

    def reset_parameters(self) -> None:
        m0, m1, lg = self.w0_all.shape[-1], self.w1_all.shape[-1], self.gw_all.shape[-1]
        with torch.no_grad():
            self.w0_all.normal_(0.0, 1.0 / math.sqrt(m0))
            a, b = self.w1_all.new_empty((2,) + self.w1_all.shape[:2] + (lg, lg)).normal_(0.0, 1.0 / math.sqrt(m1))
            self.w1_all.copy_(torch.cat([torch.cat([a, b], -1), torch.cat([-b, a], -1)], -2))
            self.gw_all.normal_(0.0, 1.0 / math.sqrt(self.focus_dim))

    def forward(self, u0: torch.Tensor, alpha: torch.Tensor | None = None) -> torch.Tensor:
        # F is the module's (n_focus): a u0 of another F is u0's error, not alpha's or w0_all's,
        # which the op would name (it takes F from u0)
        if isinstance(u0, torch.Tensor) and u0.dim() == 3 and u0.shape[0] != self.w0_all.shape[1]:
            raise ValueError(f"SO2MixingStack: u0 must have shape (F, E, ROW) with F = n_focus = "
                             f"{self.w0_all.shape[1]}, got {tuple(u0.shape)}")
        if alpha is None:
            if self.apply_alpha:
                raise ValueError("SO2MixingStack: alpha (E, F) is required when apply_alpha=True")
            if type(u0) is FxProxy or (isinstance(u0, torch.Tensor) and u0.dim() == 3):   # a proxy: traced
                alpha = u0.new_ones((u0.shape[1], u0.shape[0]))
        return so2_mixing_stack(u0, alpha, self.w0_all, self.w1_all, self.gw_all, lmax=self.lmax,
                                focus_dim=self.focus_dim, apply_alpha=self.apply_alpha)

    def extra_repr(self) -> str:
        return (f"lmax={self.lmax}, focus_dim={self.focus_dim}, n_focus={self.n_focus}, "
                f"n_layers={self.n_layers}, apply_alpha={self.apply_alpha}")
