"""grouped_glu_mlp GEMM tile configs as data.

Keys (tuning, later): H, F, E, dtype and a power-of-two bucket of T. ``GemmConfig`` is one
GEMM's tiles; the op uses one per kernel role (fc1, fc2, dgrad, wgrad).
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class GemmConfig:
    block_m: int = 64
    block_n: int = 64
    block_k: int = 32
    num_warps: int = 4
    num_stages: int = 3
    programs_per_sm: int = 2

    @property
    def name(self) -> str:
        return (f"M{self.block_m}-N{self.block_n}-K{self.block_k}-w{self.num_warps}-s{self.num_stages}"
                f"-p{self.programs_per_sm}")


def heuristic(role: str, itemsize: int) -> GemmConfig:
    """Safe defaults per kernel role. tl.dot needs tiles >= 16; 16-bit operands take larger K
    tiles for the same bytes."""
    block_k = 64 if itemsize <= 2 else 32
    if role == "wgrad":
        return GemmConfig(block_m=64, block_n=64, block_k=32, num_warps=4, num_stages=3)
    return GemmConfig(block_m=64, block_n=64, block_k=block_k, num_warps=4, num_stages=3)
