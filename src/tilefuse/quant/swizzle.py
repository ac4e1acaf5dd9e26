"""The 128x4 swizzled scale layout of cuBLAS / CUTLASS / cuDNN block-scaled GEMMs.

A (rows, cols) scale matrix is padded with zeros to R = 128 * cdiv(rows, 128) rows and
C = 4 * cdiv(cols, 4) columns; scale (r, c) then lives at byte offset

    ((r // 128) * (C // 4) + c // 4) * 512 + (r % 32) * 16 + ((r // 32) % 4) * 4 + (c % 4)

of a flat buffer of R * C elements (docs/specs/grouped_glu_mlp.md, "Scale layout"). Both directions
are one permuting copy, done here with torch; the quantizer kernels write this layout directly
when called with ``swizzle=True``.
"""

from __future__ import annotations

import torch

from ..utils import cdiv, check_tensor
from .formats import SWIZZLE_COLS, SWIZZLE_ROWS


def padded_shape(rows: int, cols: int) -> tuple[int, int]:
    """(R, C): the scale matrix's shape after padding to the 128x4 tiles."""
    return cdiv(rows, SWIZZLE_ROWS) * SWIZZLE_ROWS, cdiv(cols, SWIZZLE_COLS) * SWIZZLE_COLS


def swizzled_offset(r, c, padded_cols: int):
    """Byte offset of scale (r, c) in the flat swizzled buffer (ints or integer tensors)."""
    return (((r // 128) * (padded_cols // 4) + c // 4) * 512
            + (r % 32) * 16 + ((r // 32) % 4) * 4 + (c % 4))


def _check_2d(name: str, t) -> None:
    check_tensor("", name, t)


def swizzle_scales(scales_2d: torch.Tensor) -> torch.Tensor:
    """Compact (rows, cols) scales -> flat swizzled buffer of R * C elements (same dtype).

    Padding entries are zero. Works for any element type (uint8 E8M0, float8_e4m3fn, ...).

    Example:
        >>> flat = swizzle_scales(q.scales)            # q from quantize_mxfp8(x)
        >>> torch.equal(unswizzle_scales(flat, *q.scales.shape), q.scales)
        True
    """
    _check_2d("swizzle_scales: scales_2d", scales_2d)
    if scales_2d.dim() != 2:
        raise ValueError(f"swizzle_scales: scales_2d must be 2-D (rows, cols), got shape "
                         f"{tuple(scales_2d.shape)}")
    rows, cols = scales_2d.shape
    big_r, big_c = padded_shape(rows, cols)
    padded = scales_2d.new_zeros(big_r, big_c)
    padded[:rows, :cols] = scales_2d
    # (r // 128, (r // 32) % 4, r % 32, c // 4, c % 4) -> (r // 128, c // 4, r % 32, (r // 32) % 4, c % 4)
    tiles = padded.view(big_r // 128, 4, 32, big_c // 4, 4).permute(0, 3, 2, 1, 4)
    return tiles.reshape(-1)


def unswizzle_scales(flat: torch.Tensor, rows: int, cols: int) -> torch.Tensor:
    """Flat swizzled buffer -> compact (rows, cols) scales (a new contiguous tensor)."""
    _check_2d("unswizzle_scales: flat", flat)
    for name, v in (("rows", rows), ("cols", cols)):
        if isinstance(v, bool) or not isinstance(v, int):
            raise TypeError(f"unswizzle_scales: {name} must be a non-negative int, got {v!r}")
        if v < 0:
            raise ValueError(f"unswizzle_scales: {name} must be a non-negative int, got {v!r}")
    big_r, big_c = padded_shape(rows, cols)
    if flat.dim() != 1 or flat.numel() != big_r * big_c:
        raise ValueError(f"unswizzle_scales: flat must be 1-D with {big_r * big_c} elements "
                         f"(({rows}, {cols}) padded to ({big_r}, {big_c})), got shape "
                         f"{tuple(flat.shape)}")
    tiles = flat.view(big_r // 128, big_c // 4, 32, 4, 4).permute(0, 3, 2, 1, 4)
    return tiles.reshape(big_r, big_c)[:rows, :cols].contiguous()
