"""DyT launchers: plain functions from tensors to tensors. Allocate, pick a config, launch.

Layouts (see kernels.py): the kernels see a contiguous (n_rows, n_cols) matrix.
- channels-last x (..., C): n_cols = C.
- channels-first x (N, C, *spatial) contiguous: n_rows = N*C, n_cols = prod(spatial), each row
  reads its channel's parameters; no transpose copy.
- channels-first x stored in ``torch.channels_last`` memory format: its movedim(1, -1) view is
  contiguous, so it runs as channels-last on that view, and the output keeps x's format.
- channels-first with no spatial dims (or all of size 1) is channels-last over C.
Other strides are made contiguous first (one copy).
"""

from __future__ import annotations

import dataclasses
import math

import torch
from ...utils import cdiv

from ... import launches, policy
from ...tuning import lookup_config
from ...device import num_sms
from . import configs
from .configs import DyTConfig, DyTProblem

REDUCE_BLOCK_P = 16
REDUCE_BLOCK_N = 128

# Tests and the tuner set this to fill internal float32 scratch with NaN before each launch,
# so a partial sum that no program wrote shows up as NaN instead of stale memory.
POISON_SCRATCH = False


@dataclasses.dataclass(frozen=True)
class _Layout:
    n_rows: int
    n_cols: int
    n_channels: int
    param_per_row: bool   # channels-first rows: weight[row % C]
    moved: bool           # run on x.movedim(1, -1) (channels-first in channels_last format)


def _layout(x: torch.Tensor, channels_last: bool) -> _Layout:
    numel = x.numel()
    if channels_last:
        c = x.shape[-1]
        return _Layout(numel // max(c, 1), c, c, False, False)
    c = x.shape[1]
    spatial = math.prod(x.shape[2:])
    if spatial == 1:
        return _Layout(numel // max(c, 1), c, c, False, False)
    if not x.is_contiguous() and x.movedim(1, -1).is_contiguous():
        return _Layout(numel // max(c, 1), c, c, False, True)
    return _Layout(numel // max(c * spatial, 1) * c, spatial, c, True, False)


def new_output(x: torch.Tensor, channels_last: bool) -> torch.Tensor:
    """The output/dx allocation for ``x``: channels_last-format input keeps its format, all
    else is contiguous. Shared by the real and the fake implementations."""
    if not channels_last and _layout(x, channels_last).moved:
        return torch.empty_like(x)  # x is dense, so its strides are preserved
    return torch.empty(x.shape, dtype=x.dtype, device=x.device)


def _as_matrix(t: torch.Tensor, lay: _Layout) -> torch.Tensor:
    """The contiguous tensor whose memory is the kernels' (n_rows, n_cols) matrix."""
    if lay.moved:
        return t.movedim(1, -1).contiguous()
    return t.contiguous()


def _matrix_out(out: torch.Tensor, lay: _Layout) -> torch.Tensor:
    return out.movedim(1, -1) if lay.moved else out


def problem_for(x: torch.Tensor, channels_last: bool, pass_: str) -> DyTProblem:
    lay = _layout(x, channels_last)
    return DyTProblem(pass_, lay.n_rows, lay.n_cols, x.element_size(), lay.param_per_row)


def pick_config(problem: DyTProblem) -> DyTConfig:
    """Level >= 2: the tuned entry for the problem's key when the table has one; otherwise
    (and at level 1) the heuristic default."""
    if policy.get_level() >= 2:
        tuned = lookup_config("dyt", problem)
        if tuned is not None:
            return tuned
    return configs.heuristic(problem)


def _check_out(out: torch.Tensor | None, x: torch.Tensor, channels_last: bool,
               name: str) -> torch.Tensor:
    """A fresh output for x, or ``out`` after checking it has exactly that layout."""
    if out is None:
        return new_output(x, channels_last)
    want = new_output(x.detach().to("meta"), channels_last)
    if out.shape != want.shape or out.stride() != want.stride() or out.dtype != x.dtype \
            or out.device != x.device:
        raise ValueError(f"{name} must have shape {tuple(want.shape)}, strides {want.stride()}, "
                         f"dtype {x.dtype} and device {x.device}")
    return out


def _scratch(*shape, device) -> torch.Tensor:
    buf = torch.empty(*shape, dtype=torch.float32, device=device)
    return buf.fill_(float("nan")) if POISON_SCRATCH else buf


def forward(x, alpha, weight, bias, channels_last: bool, config: DyTConfig | None = None,
            out: torch.Tensor | None = None):
    """y = weight * tanh(alpha * x) + bias, y in x.dtype, by the Triton forward kernel.

    ``out`` (optional) receives y; it must have the layout ``new_output`` gives.
    """
    y = _check_out(out, x, channels_last, "out")
    if x.numel() == 0:
        return y
    lay = _layout(x, channels_last)
    cfg = config or pick_config(problem_for(x, channels_last, "fwd"))
    xm = _as_matrix(x, lay)
    ym = _matrix_out(y, lay)
    grid = (cdiv(lay.n_rows, cfg.block_m) * cdiv(lay.n_cols, cfg.block_n),)
    from .kernels import dyt_fwd_kernel
    dyt_fwd_kernel[grid](
        xm, ym, alpha, weight.contiguous(), weight if bias is None else bias.contiguous(),
        lay.n_rows, lay.n_cols, lay.n_channels,
        HAS_BIAS=bias is not None, PARAM_PER_ROW=lay.param_per_row,
        BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, num_warps=cfg.num_warps,
    )
    launches.record("dyt_fwd")
    return y


def backward(dy, x, alpha, weight, bias, channels_last: bool, config: DyTConfig | None = None,
             dx_out: torch.Tensor | None = None):
    """(dx, dalpha, dweight, dbias) by the persistent backward kernel and a deterministic
    second-stage reduction. dx in x.dtype; each parameter gradient in its parameter's dtype,
    accumulated in float32; dbias is None without a bias. ``dx_out`` as ``out`` of forward."""
    has_bias = bias is not None
    dx = _check_out(dx_out, x, channels_last, "dx_out")
    dalpha = torch.empty_like(alpha, memory_format=torch.contiguous_format)
    dweight = torch.empty_like(weight, memory_format=torch.contiguous_format)
    dbias = torch.empty_like(bias, memory_format=torch.contiguous_format) if has_bias else None
    if x.numel() == 0:
        dalpha.zero_()
        dweight.zero_()
        if has_bias:
            dbias.zero_()
        return dx, dalpha, dweight, dbias

    lay = _layout(x, channels_last)
    cfg = config or pick_config(problem_for(x, channels_last, "bwd"))
    xm = _as_matrix(x, lay)
    dym = _as_matrix(dy, lay)
    dxm = _matrix_out(dx, lay)
    weight_c = weight.contiguous()
    n_row_blocks = cdiv(lay.n_rows, cfg.block_m)
    target_programs = cfg.programs_per_sm * num_sms(x.device)

    from .kernels import dyt_bwd_cols_kernel, dyt_bwd_reduce_kernel, dyt_bwd_rows_kernel
    if lay.param_per_row:
        # Partials: one float32 per row (N*C of them, each written once), summed over N below.
        n_groups = max(1, min(n_row_blocks, target_programs))
        n_parts, n_part_cols = lay.n_rows // lay.n_channels, lay.n_channels
        dweight_part = _scratch(lay.n_rows, device=x.device)
        dbias_part = _scratch(lay.n_rows, device=x.device) if has_bias else dweight_part
        dalpha_part = _scratch(n_groups, device=x.device)
        dyt_bwd_rows_kernel[(n_groups,)](
            dym, xm, dxm, alpha, weight_c, dweight_part, dbias_part, dalpha_part,
            lay.n_rows, lay.n_cols, lay.n_channels, n_groups,
            HAS_BIAS=has_bias, BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, num_warps=cfg.num_warps,
        )
    else:
        # Partials: (n_groups, C) float32 per parameter, each element written once by the
        # program that owns that column block and row group; no zero fill, no atomics.
        n_col_blocks = cdiv(lay.n_cols, cfg.block_n)
        n_groups = max(1, min(n_row_blocks, target_programs // n_col_blocks))
        n_parts, n_part_cols = n_groups, lay.n_cols
        dweight_part = _scratch(n_groups, lay.n_cols, device=x.device)
        dbias_part = _scratch(n_groups, lay.n_cols, device=x.device) if has_bias else dweight_part
        dalpha_part = _scratch(n_groups * n_col_blocks, device=x.device)
        dyt_bwd_cols_kernel[(n_groups * n_col_blocks,)](
            dym, xm, dxm, alpha, weight_c, dweight_part, dbias_part, dalpha_part,
            lay.n_rows, lay.n_cols, n_groups,
            HAS_BIAS=has_bias, BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, num_warps=cfg.num_warps,
        )
    dyt_bwd_reduce_kernel[(cdiv(n_part_cols, REDUCE_BLOCK_N),)](
        dweight_part, dbias_part, dalpha_part, dweight, dbias if has_bias else dweight, dalpha,
        n_parts, n_part_cols, dalpha_part.numel(),
        HAS_BIAS=has_bias, BLOCK_P=REDUCE_BLOCK_P, BLOCK_N=REDUCE_BLOCK_N, num_warps=4,
    )
    launches.record("dyt_bwd")
    return dx, dalpha, dweight, dbias
