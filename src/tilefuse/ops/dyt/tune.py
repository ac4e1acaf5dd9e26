"""DyT's tuning family: table keys, config space, sweep inputs and tolerances.

Forward and backward are separate keys (a config is chosen per pass by the launchers). The
baseline is the heuristic config (what levels 1 and 2 run for a key never swept); candidates
are the rest of ``configs.candidates``. Every candidate is a tile change of the same kernels,
so the 1% margin applies.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
from pathlib import Path

import torch

from ...tuning.family import TILE, TuningFamily, cli_itemsize
from ...utils import next_power_of_2
from . import configs, launch, reference
from .configs import DyTConfig, DyTProblem

_HERE = Path(__file__).resolve().parent

# The standard grid (`tilefuse tune --all-defaults`): the spec's widths at 2**26 elements.
DEFAULT_WIDTHS = tuple(2 ** k for k in range(4, 14))   # 16 .. 8192
DEFAULT_ELEMENTS = 2 ** 26

# An itemsize stands for every x dtype of that size: the configs move the same bytes.
_SWEEP_DTYPE = {4: torch.float32, 2: torch.bfloat16}

_KEY = re.compile(r"(fwd|bwd)-M(\d+)-N(\d+)-x(\d+)(-cf)?")

# Channels-first problems do not record the channel count C (no config depends on it: it only
# selects which weight a row reads and how many partial rows the second stage sums); sweeps
# use the largest divisor of the row count up to this.
_SWEEP_CHANNELS = 512


@functools.lru_cache(maxsize=1024)
def _channels(n_rows: int) -> int:
    """The channel count a channels-first sweep's rows are laid out in: the largest divisor of
    ``n_rows`` up to _SWEEP_CHANNELS (a power-of-two row count: its gcd with 512)."""
    return next(c for c in range(min(n_rows, _SWEEP_CHANNELS), 0, -1) if n_rows % c == 0)


_EPS32 = torch.finfo(torch.float32).eps


@functools.lru_cache(maxsize=4096)
def key_of(p: DyTProblem) -> str:
    """``{pass}-M{rows bucket}-N{cols}-x{itemsize}[-cf]``, e.g. ``bwd-M1048576-N64-x2``.

    Exact: the pass, the column count (it sets the tile shape and whether rows are tiled),
    the element size of x, and the channels-first layout (another backward kernel). Bucketed:
    the row count, to the next power of two (it varies per call with batch and sequence
    length; the pruned config space depends on it only through that power of two).
    """
    layout = "-cf" if p.param_per_row else ""
    return f"{p.pass_}-M{next_power_of_2(p.n_rows)}-N{p.n_cols}-x{p.x_itemsize}{layout}"


@functools.lru_cache(maxsize=1024)
def _allowed(key: str) -> frozenset:
    return frozenset(configs.candidates(FAMILY.problem_for_key(key)))


@dataclasses.dataclass(frozen=True)
class DyTInputs:
    x: torch.Tensor
    alpha: torch.Tensor
    weight: torch.Tensor
    bias: torch.Tensor
    dy: torch.Tensor | None     # backward only
    channels_last: bool


def _mismatch(name: str, got: torch.Tensor, want: torch.Tensor, tol: torch.Tensor) -> list[str]:
    diff = (got.double() - want.double()).abs()
    excess = diff - tol
    bad = excess > 0
    if not bad.any():
        return []
    worst = int(excess.flatten().argmax())
    return [f"{name}: {int(bad.sum())} of {got.numel()} elements differ; worst |diff| "
            f"{diff.flatten()[worst].item():.3g} > tolerance {tol.flatten()[worst].item():.3g} "
            f"at flat index {worst}"]


class DyTFamily(TuningFamily):
    name = "dyt"
    config_class = DyTConfig
    # What a measurement depends on (the cache file's fingerprint, store.kernel_source_hash):
    # the kernels and their launch, the candidates, the dispatch and the references the sweep
    # checks against.
    source_files = (_HERE / "kernels.py", _HERE / "configs.py", _HERE / "launch.py", _HERE / "plan.py",
                    _HERE / "tune.py", _HERE / "reference.py", _HERE.parent / "triton_common.py")

    def key(self, problem: DyTProblem) -> str:
        return key_of(problem)

    def problem_for_key(self, key: str) -> DyTProblem:
        m = _KEY.fullmatch(key) if isinstance(key, str) else None
        if m is None:
            raise ValueError(f"not a dyt key: {key!r} (expected e.g. 'fwd-M1048576-N64-x2')")
        pass_, rows, cols, itemsize, cf = m.groups()
        rows, cols, itemsize = int(rows), int(cols), int(itemsize)
        if rows != next_power_of_2(rows) or cols < 1 or itemsize not in _SWEEP_DTYPE:
            raise ValueError(f"not a dyt key: {key!r} (rows bucket a power of two, cols >= 1, "
                             f"itemsize 2 or 4)")
        return DyTProblem(pass_, rows, cols, itemsize, cf is not None)

    def is_valid(self, key: str, config) -> bool:
        return config in _allowed(key)

    def baseline(self, problem: DyTProblem) -> DyTConfig:
        return configs.heuristic(problem)

    def candidates(self, problem: DyTProblem) -> list[DyTConfig]:
        default = configs.heuristic(problem)
        return [c for c in configs.candidates(problem) if c != default]

    def change(self, config: DyTConfig) -> str:
        return TILE

    def complexity(self, config: DyTConfig) -> tuple:
        return config.complexity()

    def check_problem(self, problem: DyTProblem) -> DyTProblem:
        """An odd row count of the same bucket where the swept one is even (a key's power of
        two): a partial last row block for every block_m > 1. One row fewer, or for the
        channels-first layout the first odd count below whose rows still split into several
        channels (make_inputs: their largest divisor up to _SWEEP_CHANNELS; 2**k - 1 may be
        prime), so the check still reads a weight per channel."""
        rows = problem.n_rows
        if rows <= 2 or rows % 2:
            return problem
        for fewer in range(1, min(rows // 2, 64), 2):
            if next_power_of_2(rows - fewer) != next_power_of_2(rows):
                break
            if not problem.param_per_row or _channels(rows - fewer) > 1:
                return dataclasses.replace(problem, n_rows=rows - fewer)
        return dataclasses.replace(problem, n_rows=rows - 1)

    def make_inputs(self, problem: DyTProblem, device, seed: int) -> DyTInputs:
        gen = torch.Generator(device=device).manual_seed(seed)
        dtype = _SWEEP_DTYPE[problem.x_itemsize]
        if problem.param_per_row:
            channels = _channels(problem.n_rows)
            shape = (problem.n_rows // channels, channels, problem.n_cols)
        else:
            channels = problem.n_cols
            shape = (problem.n_rows, problem.n_cols)

        def randn(*size, dtype=torch.float32):
            return torch.randn(size, generator=gen, device=device, dtype=dtype)

        # |x| up to ~8 with alpha in [0.25, 1): both the linear and the saturated part of tanh.
        return DyTInputs(
            x=2 * randn(*shape, dtype=dtype),
            alpha=0.25 + 0.75 * torch.rand(1, generator=gen, device=device),
            weight=1 + 0.1 * randn(channels),
            bias=0.1 * randn(channels),
            dy=randn(*shape, dtype=dtype) if problem.pass_ == "bwd" else None,
            channels_last=not problem.param_per_row,
        )

    def input_bytes(self, problem: DyTProblem) -> int:
        tensors = 1 if problem.pass_ == "fwd" else 2   # x; x and dy
        return tensors * problem.n_rows * problem.n_cols * problem.x_itemsize

    def run(self, problem: DyTProblem, choice: DyTConfig, inputs: DyTInputs) -> dict:
        i = inputs
        if problem.pass_ == "fwd":
            return {"y": launch.forward(i.x, i.alpha, i.weight, i.bias, i.channels_last, config=choice)}
        dx, dalpha, dweight, dbias = launch.backward(i.dy, i.x, i.alpha, i.weight, i.bias,
                                                     i.channels_last, config=choice)
        return {"dx": dx, "dalpha": dalpha, "dweight": dweight, "dbias": dbias}

    def expected_launches(self, problem: DyTProblem, choice) -> tuple[str, ...]:
        return ("dyt_fwd",) if problem.pass_ == "fwd" else ("dyt_bwd",)

    def compare(self, problem: DyTProblem, inputs: DyTInputs, got: dict, want: dict) -> list[str]:
        """Candidate vs heuristic config on the same inputs, within tolerances derived here.

        Elementwise outputs (y, dx). A config only decides which program computes an element,
        not the operations that compute it, so y and dx are expected bitwise equal. What a
        compiler may still vary between tile shapes is whether a multiply-add is contracted
        into an FMA; each contraction skips one rounding, at most eps32/2 of the magnitude at
        that site. An element's path has at most 8 such sites (the tanh polynomial's Horner
        steps and tail, w*t + b, 1 - t*t), each bounded by the scale S = |w*t| + |b| for y
        and S = |alpha*dy*w| for dx (|t| <= 1), so the float32 results differ by at most
        4*eps32*S; rounding both to x.dtype adds one ulp of x.dtype, <= eps_x*S. Tolerance:
        (4*eps32 + eps_x)*S plus the smallest normal of x.dtype for results that underflow:
        ~5 ulp for float32 x, ~1 ulp for bfloat16/float16 x.

        Parameter gradients (dalpha, dweight, dbias) are float32 sums of n terms (every
        element for dalpha, a channel's elements for dweight and dbias) whose order
        depends on the config (tile, persistent grid). Each of the <= n roundings of a sum
        is at most eps32/2 of a partial sum, itself at most A = sum|term|; the roundings act
        as independent zero-mean errors, so each order is off by ~sqrt(n)*eps32/2*A (rms),
        and two orders differ by < 2*sqrt(n)*eps32*A (about 3 sigma, with every partial sum
        pessimistically taken as A). The terms themselves may differ by the 4*eps32 above,
        and each result is rounded to its parameter's dtype (one ulp of that dtype).
        Tolerance: (4 + 2*sqrt(n))*eps32*A + eps_param*|value| + the smallest normal.
        A = sum|term| comes from the reference on absolute inputs: with |x|, |dy|, |alpha|,
        |w| every term is non-negative, so its dweight, dbias, dalpha are sum|dy*t|,
        sum|dy|, sum|x*g|, and its dx with x = 0 (t = 0) is |alpha*dy*w|.
        """
        i = inputs
        f64 = torch.float64
        ax, aalpha, aw, ab = (t.abs().to(f64) for t in (i.x, i.alpha, i.weight, i.bias))
        x_info = torch.finfo(i.x.dtype)
        elementwise = 4 * _EPS32 + x_info.eps
        if problem.pass_ == "fwd":
            scale = reference.dyt_reference(ax, aalpha, aw, ab, channels_last=i.channels_last,
                                            compute_dtype=f64)
            return _mismatch("y", got["y"], want["y"], elementwise * scale + x_info.tiny)

        ady = i.dy.abs().to(f64)
        _, abs_dalpha, abs_dweight, abs_dbias = reference.dyt_backward_reference(
            ady, ax, aalpha, aw, ab, channels_last=i.channels_last, compute_dtype=f64)
        dx_scale = reference.dyt_backward_reference(
            ady, torch.zeros_like(ax), aalpha, aw, None, channels_last=i.channels_last,
            compute_dtype=f64)[0]
        out = _mismatch("dx", got["dx"], want["dx"], elementwise * dx_scale + x_info.tiny)
        for name, abs_sum, param in (("dalpha", abs_dalpha, i.alpha), ("dweight", abs_dweight, i.weight),
                                     ("dbias", abs_dbias, i.bias)):
            n_terms = i.x.numel() // param.numel()   # all elements; a channel's elements
            p_info = torch.finfo(param.dtype)
            tol = ((4 + 2 * math.sqrt(n_terms)) * _EPS32 * abs_sum
                   + p_info.eps * want[name].abs().to(f64) + p_info.tiny)
            out += _mismatch(name, got[name], want[name], tol)
        return out

    def default_problems(self) -> list[DyTProblem]:
        return [DyTProblem(pass_, DEFAULT_ELEMENTS // width, width, itemsize, False)
                for itemsize in (4, 2) for width in DEFAULT_WIDTHS for pass_ in ("fwd", "bwd")]

    def problems_from_cli(self, shape: str, dtype: str | None, pass_: str | None) -> list[DyTProblem]:
        m = re.fullmatch(r"(\d+)x(\d+)", shape or "")
        if m is None or 0 in (int(m[1]), int(m[2])):
            raise ValueError(f"dyt: --shape is ROWSxCOLS of a channels-last x, e.g. 65536x1024; "
                             f"got {shape!r}")
        itemsize = cli_itemsize("dyt", dtype or "fp32")
        if pass_ not in (None, "fwd", "bwd"):
            raise ValueError(f"dyt: --pass must be fwd or bwd, got {pass_!r}")
        return [DyTProblem(p, int(m[1]), int(m[2]), itemsize, False)
                for p in ((pass_,) if pass_ else ("fwd", "bwd"))]


FAMILY = DyTFamily()
