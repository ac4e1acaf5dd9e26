"""so2_mixing_stack launch configurations as data.

The stack's problem key is (lmax, focus_dim, dtype); edge counts vary per call and only set the
grid. ``So2Config`` holds the GEMM tiles; BLOCK_K equals focus_dim where focus_dim is a power
of two >= 16 so that one K tile is one sub-tile (what a bitwise-equal fused backward needs).
"""

from __future__ import annotations

import dataclasses

from ...utils import next_power_of_2


@dataclasses.dataclass(frozen=True)
class So2Config:
    block_m: int = 32
    block_n: int = 64
    block_k: int = 32
    num_warps: int = 4
    num_stages: int = 2

    @property
    def name(self) -> str:
        return f"M{self.block_m}-N{self.block_n}-K{self.block_k}-w{self.num_warps}-s{self.num_stages}"


def cf_padded(focus_dim: int) -> int:
    """focus_dim rounded up to a power of two, at least 16 (tl.dot's smallest tile)."""
    return max(16, next_power_of_2(focus_dim))


def heuristic(lmax: int, focus_dim: int) -> So2Config:
    block_k = cf_padded(focus_dim) if cf_padded(focus_dim) == focus_dim else 32
    return So2Config(block_m=32, block_n=64, block_k=min(block_k, 64), num_warps=4, num_stages=2)
