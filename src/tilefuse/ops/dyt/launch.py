"""DyT launchers: plain functions from tensors to tensors. Allocate, pick a config, launch.

Layouts (see kernels.py): the kernels see a contiguous (n_rows, n_cols) matrix.
- channels-last x (..., C): n_cols = C.
- channels-first x (N, C, *spatial) contiguous: n_rows = N*C, n_cols = prod(spatial), each row
  reads its channel's parameters; no transpose copy.
- channels-first x stored in ``torch.channels_last`` memory format: its movedim(1, -1) view is
  contiguous, so it runs as channels-last on that view, and the output keeps x's format.
- channels-first with no spatial dims (or all of size 1) is channels-last over C.
Other strides are made contiguous first (one copy).

What a launch needs besides the tensors (config, grids, scratch sizes, the kernels'
launchers) is built once per call plan (plan.py) as a ForwardLaunch / BackwardLaunch; the
launchers here look the plan up, so per call only allocations and launches remain.
"""

from __future__ import annotations

import dataclasses
import math
import threading

import torch
from ...utils import cdiv

from ... import policy
from ...tuning import lookup_config
from ...device import current_cuda_device, current_cuda_stream, num_sms, stream_is_capturing
from . import configs
from . import plan as plans
from .configs import DyTConfig, DyTProblem

REDUCE_BLOCK_P = 16
REDUCE_BLOCK_N = 128

# Tests and `tilefuse check` (verify.poisoned) set these to fill y/dx and the internal float32
# scratch with NaN before each launch, so an element that no program wrote shows up as NaN
# instead of stale memory.
POISON_SCRATCH = False
POISON_OUTPUTS = False
# Scratch buffers up to this size are kept by their plan and reused (BackwardLaunch).
SCRATCH_REUSE_BYTES = 256 * 1024


@dataclasses.dataclass(frozen=True)
class _Layout:
    n_rows: int
    n_cols: int
    n_channels: int
    param_per_row: bool   # channels-first rows: weight[row % C]
    moved: bool           # run on x.movedim(1, -1) (channels-first in channels_last format)


# The kernels take the matrix's extents (n_rows, n_cols and the rows' per-channel count) as
# Triton integers: 32-bit below 2**31, 64-bit from 2**31 on (Triton's specialization), and step
# through them in tiles of up to configs.MAX_TILE elements. An extent within a tile of 2**31
# would wrap a tile's last index in 32 bits (a negative column index passes the mask); such a
# matrix (a 2**31 - 1 element row, say) runs the reference formulas (``addressable``).
INT32_EDGE = 2 ** 31 - 2 ** 16


def addressable(lay: "_Layout") -> bool:
    """Whether the kernels' 32-bit tile arithmetic covers this layout's extents."""
    # the channels-first reduction also loops over n_rows / C parts (BackwardLaunch)
    extents = (lay.n_rows, lay.n_cols) + ((lay.n_rows // max(lay.n_channels, 1),) if lay.param_per_row else ())
    return not any(INT32_EDGE <= n < 2 ** 31 for n in extents)


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


# Outputs are allocated with torch.empty_like (cheaper than torch.empty with a shape, dtype
# and device) where that returns a plain tensor like torch.empty does.
_PLAIN = (torch.Tensor, torch.nn.Parameter)


def alloc_output(x: torch.Tensor, moved: bool) -> torch.Tensor:
    """An output/dx for ``x``: in x's (dense, channels_last) format for the moved layout, else
    contiguous; NaN-filled under POISON_OUTPUTS."""
    if moved:
        out = torch.empty_like(x)  # x is dense, so its strides are preserved
    elif x.__class__ in _PLAIN:
        out = torch.empty_like(x, memory_format=torch.contiguous_format)
    else:
        out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    return out.fill_(float("nan")) if POISON_OUTPUTS else out


def new_output(x: torch.Tensor, channels_last: bool) -> torch.Tensor:
    """The output/dx allocation for ``x``: channels_last-format input keeps its format, all
    else is contiguous. Shared by the real and the fake implementations."""
    return alloc_output(x, _layout(x, channels_last).moved)


def _as_matrix(t: torch.Tensor, lay: _Layout) -> torch.Tensor:
    """The contiguous tensor whose memory is the kernels' (n_rows, n_cols) matrix."""
    if lay.moved:
        return t.movedim(1, -1).contiguous()
    return t.contiguous()


def problem_for(x: torch.Tensor, channels_last: bool, pass_: str) -> DyTProblem:
    return _problem(_layout(x, channels_last), x.element_size(), pass_)


def _problem(lay: _Layout, x_itemsize: int, pass_: str) -> DyTProblem:
    return DyTProblem(pass_, lay.n_rows, lay.n_cols, x_itemsize, lay.param_per_row)


def pick_config(problem: DyTProblem, level: int | None = None) -> DyTConfig:
    """Level >= 2: the tuned entry for the problem's key when the table has one; otherwise
    (and at level 1) the heuristic default. ``level``: the call plan's (default: the current)."""
    if (policy.get_level() if level is None else level) >= 2:
        tuned = lookup_config("dyt", problem)
        if tuned is not None:
            return tuned
    return configs.heuristic(problem)


def _check_out(out: torch.Tensor, x: torch.Tensor, channels_last: bool, name: str) -> torch.Tensor:
    """``out`` after checking it has exactly the layout ``new_output`` gives x."""
    want = new_output(x.detach().to("meta"), channels_last)
    if out.shape != want.shape or out.stride() != want.stride() or out.dtype != x.dtype \
            or out.device != x.device:
        raise ValueError(f"{name} must have shape {tuple(want.shape)}, strides {want.stride()}, "
                         f"dtype {x.dtype} and device {x.device}")
    return out


def _scratch(*shape, device) -> torch.Tensor:
    buf = torch.empty(*shape, dtype=torch.float32, device=device)
    return buf.fill_(float("nan")) if POISON_SCRATCH else buf


def _check_addressable(lay: _Layout) -> None:
    if not addressable(lay):
        raise ValueError(f"dyt kernels: a ({lay.n_rows}, {lay.n_cols}) matrix has an extent within a tile of 2**31, "
                         f"which their 32-bit tile indices wrap; the public dyt() runs the reference formulas")


def row_groups(cfg: DyTConfig, n_row_blocks: int, n_col_blocks: int, device: torch.device) -> int:
    """How many programs of a persistent kernel share each column block's row blocks: about
    ``programs_per_sm`` * SMs programs in all, at least one and no more than the row blocks."""
    return max(1, min(n_row_blocks, cfg.programs_per_sm * num_sms(device) // n_col_blocks))


class ForwardLaunch:
    """The forward kernel's launch for one call plan: config, grid, launcher (one program per
    tile, or with ``config.prefetch`` the persistent prefetching kernel).

    ``launch(xm, y, alpha, weight, bias)``: xm and y hold the (n_rows, n_cols) matrix in memory
    order (contiguous, or channels_last-format x and y for the moved layout: the kernels take
    only their addresses); weight and bias contiguous (bias is weight without a bias)."""

    __slots__ = ("launch",)

    def __init__(self, lay: _Layout, x_itemsize: int, has_bias: bool, device: torch.device,
                 config: DyTConfig | None, level: int | None = None):
        from ..triton_common import CompiledLauncher
        from .kernels import dyt_fwd_kernel, dyt_fwd_persistent_kernel
        _check_addressable(lay)
        cfg = config or pick_config(_problem(lay, x_itemsize, "fwd"), level)
        tiles = dict(HAS_BIAS=has_bias, PARAM_PER_ROW=lay.param_per_row, BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n)
        n_row_blocks, n_col_blocks = cdiv(lay.n_rows, cfg.block_m), cdiv(lay.n_cols, cfg.block_n)
        if cfg.prefetch:
            n_groups = row_groups(cfg, n_row_blocks, n_col_blocks, device)
            self.launch = CompiledLauncher(dyt_fwd_persistent_kernel, (n_groups * n_col_blocks,),
                                           (lay.n_rows, lay.n_cols, lay.n_channels, n_groups), tiles,
                                           num_warps=cfg.num_warps)
        else:
            self.launch = CompiledLauncher(dyt_fwd_kernel, (n_row_blocks * n_col_blocks,),
                                           (lay.n_rows, lay.n_cols, lay.n_channels), tiles, num_warps=cfg.num_warps)


class BackwardLaunch:
    """The backward's two launches for one call plan: the persistent kernel (dx and partial
    sums) and the deterministic second-stage reduction, with their scratch.

    ``__call__(dym, xm, dx, alpha, weight, dweight, dbias, dalpha)``: the matrices as in
    ForwardLaunch (dym: dy in x's kernel layout), weight contiguous, the parameter gradients
    contiguous (dbias is dweight without a bias).

    Two launches: every partial must be written before a fixed-order sum reads them, and a
    kernel has no grid-wide barrier. One launch could do it with a per-column-block atomic
    ticket (the last program of a column block sums its partials in index order: still
    deterministic), at the price of a counter buffer that must be zero at every launch (a
    memset, or counters each last program resets: state shared by every call of the plan,
    with the hazards BackwardLaunch's scratch reuse guards against) and of one program summing
    a column block's n_groups partials alone. Not done without measurements that it is no
    slower on the GPU.
    """

    __slots__ = ("main", "reduce", "sizes", "_reusable", "_lock", "_kept", "_stream")

    def __init__(self, lay: _Layout, x_itemsize: int, has_bias: bool, device: torch.device,
                 config: DyTConfig | None, level: int | None = None):
        from ..triton_common import CompiledLauncher
        from .kernels import dyt_bwd_cols_kernel, dyt_bwd_reduce_kernel, dyt_bwd_rows_kernel
        _check_addressable(lay)
        cfg = config or pick_config(_problem(lay, x_itemsize, "bwd"), level)
        n_row_blocks = cdiv(lay.n_rows, cfg.block_m)
        tiles = dict(HAS_BIAS=has_bias, BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n)
        if lay.param_per_row:
            # Partials: one float32 per row (N*C of them, each written once), summed over N below.
            n_groups = row_groups(cfg, n_row_blocks, 1, device)
            n_parts, n_part_cols = lay.n_rows // lay.n_channels, lay.n_channels
            part = lay.n_rows
            self.main = CompiledLauncher(dyt_bwd_rows_kernel, (n_groups,),
                                         (lay.n_rows, lay.n_cols, lay.n_channels, n_groups), tiles,
                                         num_warps=cfg.num_warps)
            n_dalpha = n_groups
        else:
            # Partials: (n_groups, C) float32 per parameter, each element written once by the
            # program that owns that column block and row group; no zero fill, no atomics.
            n_col_blocks = cdiv(lay.n_cols, cfg.block_n)
            n_groups = row_groups(cfg, n_row_blocks, n_col_blocks, device)
            n_parts, n_part_cols = n_groups, lay.n_cols
            part = n_groups * lay.n_cols
            n_dalpha = n_groups * n_col_blocks
            self.main = CompiledLauncher(dyt_bwd_cols_kernel, (n_groups * n_col_blocks,),
                                         (lay.n_rows, lay.n_cols, n_groups), dict(tiles, PREFETCH=cfg.prefetch),
                                         num_warps=cfg.num_warps)
        self.reduce = CompiledLauncher(
            dyt_bwd_reduce_kernel, (cdiv(n_part_cols, REDUCE_BLOCK_N),), (n_parts, n_part_cols, n_dalpha),
            dict(HAS_BIAS=has_bias, BLOCK_P=REDUCE_BLOCK_P, BLOCK_N=REDUCE_BLOCK_N), num_warps=4)
        # dweight, dbias (0 without a bias: dweight's buffer is passed), dalpha partials
        self.sizes = (part, part if has_bias else 0, n_dalpha)
        self._reusable = device.type == "cuda" and 4 * sum(self.sizes) <= SCRATCH_REUSE_BYTES
        self._lock = threading.Lock()
        self._kept = None
        self._stream = None

    def _new_scratch(self, device):
        wpart = _scratch(self.sizes[0], device=device)
        bpart = _scratch(self.sizes[1], device=device) if self.sizes[1] else wpart
        return wpart, bpart, _scratch(self.sizes[2], device=device)

    def __call__(self, dym, xm, dx, alpha, weight, dweight, dbias, dalpha):
        # The partials never leave the two launches, so one set can serve every call whose
        # launches are ordered after the previous call's: on the same stream, with no other
        # thread between this call's two launches (the lock), and not while capturing a CUDA
        # graph (a replay is unordered with eager calls; captures allocate their own). Nor in
        # PyTorch's deterministic mode, where fresh memory comes NaN-filled (the tuner's check
        # relies on that). Other calls allocate, as large scratch always does: the caching
        # allocator makes that cheap, and kept buffers live as long as their plan. Streams are
        # compared by handle: PyTorch's come from pools and are never destroyed (an external
        # stream destroyed with work in flight and recreated with the same handle would pass).
        reuse = self._reusable and not POISON_SCRATCH and not torch.are_deterministic_algorithms_enabled() \
            and self._lock.acquire(blocking=False)
        try:
            parts = self._reused_scratch(dx.device) if reuse else self._new_scratch(dx.device)
            self.main(dym, xm, dx, alpha, weight, *parts)
            self.reduce(*parts, dweight, dbias, dalpha)
        finally:
            if reuse:
                self._lock.release()

    def _reused_scratch(self, device):
        """The kept partials (made on first use), or fresh ones when this call's stream is not
        theirs or is capturing a graph. Called holding the lock."""
        stream = current_cuda_stream(current_cuda_device())
        if stream_is_capturing() or (self._stream is not None and stream != self._stream):
            return self._new_scratch(device)
        if self._kept is None:
            self._kept, self._stream = self._new_scratch(device), stream
        return self._kept


def forward(x, alpha, weight, bias, channels_last: bool, config: DyTConfig | None = None,
            out: torch.Tensor | None = None):
    """y = weight * tanh(alpha * x) + bias, y in x.dtype, by the Triton forward kernel.

    ``out`` (optional) receives y; it must have the layout ``new_output`` gives.
    """
    return plans.lookup(x, alpha, weight, bias, channels_last, config).launch_forward(x, alpha, weight, bias, out)


def backward(dy, x, alpha, weight, bias, channels_last: bool, config: DyTConfig | None = None,
             dx_out: torch.Tensor | None = None):
    """(dx, dalpha, dweight, dbias) by the persistent backward kernel and a deterministic
    second-stage reduction. dx in x.dtype; each parameter gradient in its parameter's dtype,
    accumulated in float32; dbias is None without a bias. ``dx_out`` as ``out`` of forward."""
    return plans.lookup(x, alpha, weight, bias, channels_last, config).launch_backward(
        dy, x, alpha, weight, bias, dx_out)
