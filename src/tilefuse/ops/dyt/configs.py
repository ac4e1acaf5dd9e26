"""DyT launch configurations as data: the config space, a heuristic default, candidates, prune.

A ``DyTProblem`` is what a launcher knows before it launches: the (n_rows, n_cols) matrix the
kernels see (see kernels.py for the channels-first mapping), the element size of x, the pass.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools

from ...utils import next_power_of_2

MAX_TILE = 16384
MIN_TILE = 512


@dataclasses.dataclass(frozen=True)
class DyTProblem:
    pass_: str            # "fwd" or "bwd"
    n_rows: int
    n_cols: int
    x_itemsize: int       # bytes per element of x
    param_per_row: bool   # channels-first rows: n_rows = N*C, n_cols = spatial size

    def __post_init__(self):
        if self.pass_ not in ("fwd", "bwd"):
            raise ValueError(f"pass_ must be 'fwd' or 'bwd', got {self.pass_!r}")


@dataclasses.dataclass(frozen=True)
class DyTConfig:
    """A launch configuration.

    block_m x block_n is one program's tile; block_m > 1 is the row-tiled path for narrow rows.
    programs_per_sm sizes a persistent grid (the backward's, the prefetching forward's): about
    programs_per_sm * SMs programs, each looping over row blocks. prefetch (16-bit x, see
    ``_prefetch_allowed``): each program loads its next row block before the current one's
    arithmetic, bitwise the same result as without (the backward: kernels.dyt_bwd_cols_kernel's
    PREFETCH; the forward: the persistent kernels.dyt_fwd_persistent_kernel).
    """

    block_m: int
    block_n: int
    num_warps: int
    programs_per_sm: int = 4
    prefetch: bool = False

    def __post_init__(self):
        for name in ("block_m", "block_n", "num_warps", "programs_per_sm"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < 1 or (name != "programs_per_sm" and v & (v - 1)):
                raise ValueError(f"DyTConfig.{name} must be a positive power of two, got {v!r}")

    @property
    def name(self) -> str:
        return f"M{self.block_m}-N{self.block_n}-w{self.num_warps}-p{self.programs_per_sm}" \
            + ("-pf" if self.prefetch else "")

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def complexity(self) -> tuple:
        """Ordering for ties: fewer warps, one row per program, fewer programs, no prefetch
        are simpler."""
        return (self.num_warps, self.block_m, self.programs_per_sm, self.block_n, self.prefetch)


# The heuristic's (tile elements, warps, programs per SM) per (pass, x itemsize) and power-of-two
# row width, prefetching at the widths of _FITTED_PREFETCH: the winners of the H200 sweeps of the
# spec's grid at 2**26 elements. fp32 and the 16-bit forward below 4096 columns:
# benchmarks/results/2026-11-29-h200 and 2026-11-29-h200-c (whose run 4 re-swept every entry
# with this table as the baseline), the 16-bit forward re-checked in 2026-12-01-h200-j run 1;
# the 16-bit backward: 2026-12-01-h200-i run 2 (prefetching won every width by 1.05-1.30x), at 16
# columns 512-row tiles (2026-12-02-h200-n run 1: 1.11x the 256-row tile); the 16-bit forward at
# 4096 and 8192 columns: the persistent prefetching forward (2026-12-01-h200-j run 4), with 2-warp
# programs 8 an SM (2026-12-02-h200-n run 1: 1.03x the 8-warp programs 2 an SM, the same 16 warps
# an SM in four times the programs, each with a quarter of the tile). The backward at 2048 and
# 8192 columns (16-bit) and 4096 (fp32): 2026-12-02-h200-n run 4, swept with dalpha's
# per-16-byte accumulator (kernels._dalpha_acc): 8192-element tiles on 16 warps won by 1.09-1.18x. No
# simple rule fits the winners (bf16 forward: 8192-element tiles on 4 warps
# win by 27% and 12% at 128 and 512 columns, 4096 on 2 warps is best at 256, 2048 on 2 warps at
# 1024). fp32 forward: 1024 on 4 warps is within 1% of the best at every width.
_FITTED = {
    ("bwd", 4): {16: (1024, 8, 4), 32: (2048, 16, 2), 64: (2048, 16, 2), 128: (4096, 8, 2), 256: (8192, 16, 1),
                 512: (2048, 8, 2), 1024: (8192, 16, 1), 2048: (8192, 16, 1), 4096: (8192, 16, 1),
                 8192: (2048, 4, 4)},
    ("fwd", 2): {16: (2048, 2, 4), 32: (2048, 2, 4), 64: (4096, 2, 4), 128: (8192, 4, 4), 256: (4096, 2, 4),
                 512: (8192, 4, 4), 1024: (2048, 2, 4), 2048: (4096, 4, 4), 4096: (2048, 2, 8),
                 8192: (2048, 2, 8)},
    ("bwd", 2): {16: (8192, 16, 1), 32: (8192, 16, 1), 64: (8192, 16, 1), 128: (8192, 16, 1), 256: (8192, 16, 1),
                 512: (8192, 16, 1), 1024: (8192, 16, 1), 2048: (8192, 16, 1), 4096: (8192, 16, 1),
                 8192: (8192, 16, 1)},
}
_FITTED_PREFETCH = {("bwd", 2): frozenset(_FITTED[("bwd", 2)]), ("fwd", 2): frozenset({4096, 8192})}


@functools.lru_cache(maxsize=4096)
def heuristic(p: DyTProblem) -> DyTConfig:
    """The safe default for a problem (level 1, and level 2 for keys never swept): the fitted
    tile, warps, programs and prefetch of the row width's power of two (_FITTED; widths past
    8192 take 8192's, below 16 take 16's), the tile's rows capped by the problem's rows, and
    prefetch only where the backward kernel and tile allow it (``_prefetch_allowed``)."""
    width = min(max(next_power_of_2(max(p.n_cols, 1)), 16), 8192)
    if p.pass_ == "fwd" and p.x_itemsize >= 4:
        tile, num_warps, pps, prefetch = 1024, 4, 4, False
    else:
        table = (p.pass_, 2 if p.x_itemsize <= 2 else 4)
        tile, num_warps, pps = _FITTED[table][width]
        prefetch = width in _FITTED_PREFETCH.get(table, ())
    block_n = min(next_power_of_2(max(p.n_cols, 1)), tile)
    block_m = max(1, tile // block_n)
    block_m = min(block_m, next_power_of_2(max(p.n_rows, 1)))
    config = DyTConfig(block_m=block_m, block_n=block_n, num_warps=num_warps, programs_per_sm=pps,
                       prefetch=prefetch)
    if prefetch and not _prefetch_allowed(p, config):
        config = dataclasses.replace(config, prefetch=False)
    return config


def candidates(p: DyTProblem) -> list[DyTConfig]:
    """Every config worth timing for ``p``, pruned. The heuristic default is always included."""
    cols_p2 = next_power_of_2(max(p.n_cols, 1))
    block_ns = [n for n in (16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192) if n <= max(cols_p2, 16)]
    block_ms = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
    warps = (2, 4, 8, 16)
    # programs_per_sm sizes a persistent grid: the backward's, and the prefetching forward's
    # (the plain forward has one program per tile and keeps the field at 4). The forward's small
    # programs (2-4 warps) need 8-16 of them an SM to keep 16-32 warps resident.
    spaces = [((1, 2, 4, 8), (False, True))] if p.pass_ == "bwd" else \
        [((4,), (False,)), ((1, 2, 4, 8, 16), (True,))]
    out = [c for pps, prefetch in spaces
           for c in (DyTConfig(m, n, w, s, f) for m, n, w, s, f
                     in itertools.product(block_ms, block_ns, warps, pps, prefetch))
           if keep(p, c)]
    default = heuristic(p)
    if default not in out:
        out.append(default)
    return out


def keep(p: DyTProblem, c: DyTConfig) -> bool:
    """Prune rule: drop tiles that are too small to stream, too large for registers, or wider
    than the rows (a second column block of padding), and warps that would idle."""
    tile = c.block_m * c.block_n
    if not MIN_TILE <= tile <= MAX_TILE:
        return False
    cols_p2 = next_power_of_2(max(p.n_cols, 1))
    if c.block_n > max(cols_p2, 16):
        return False
    if c.block_m > 1 and c.block_n < cols_p2:
        return False  # row tiling only when a whole row fits in the tile
    if c.block_m > next_power_of_2(max(p.n_rows, 1)):
        return False
    if tile < 32 * c.num_warps * 4:
        return False  # fewer than 4 elements per thread
    if p.pass_ == "bwd" and tile > 8192:
        return False  # three fp32 accumulator tiles per program
    return not c.prefetch or _prefetch_allowed(p, c)


def _prefetch_allowed(p: DyTProblem, c: DyTConfig) -> bool:
    """Where a prefetching loop is a candidate: 16-bit x (fp32 is at the copy ceiling without
    it in both passes), 8 or more elements per thread.
    - Backward: the channels-last kernel only (the channels-first one walks each row block's
      columns), 8 or more warps. On the H200 smaller tiles and fewer warps lost 3-13%
      (results/2026-12-01-h200-i run 1).
    - Forward (dyt_fwd_persistent_kernel): both layouts, up to 8 warps (the plain forward's
      winners have 2-4), 1-16 programs per SM (``candidates``). On the H200 it wins the bf16
      sweep at 2048-8192 columns (results/2026-12-02-h200-n run 2; 4096 and 8192 in
      2026-12-01-h200-j runs 1 and 4)."""
    if p.x_itemsize > 2 or c.block_m * c.block_n < 32 * c.num_warps * 8:
        return False
    if p.pass_ == "bwd":
        return not p.param_per_row and c.num_warps >= 8
    return c.num_warps <= 8
