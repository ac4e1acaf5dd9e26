"""What the quantizers return: the quantized data, its scales and how to undo them."""

from __future__ import annotations

import dataclasses
import numbers

import torch

from ..utils import check_bool
from . import reference
from .formats import FP8_BLOCKS, MXFP8_BLOCK, NVFP4_BLOCK
from .swizzle import padded_shape, unswizzle_scales


def _check_dtype(cls: str, dtype) -> None:
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"{cls}.dequantize: dtype must be a floating-point torch.dtype, got {dtype!r}")


def check_block(fn: str, block) -> tuple[int, int]:
    """``block`` as a tuple of two ints, one of FP8_BLOCKS. bool is an int subclass and
    128.0 == 128, so a membership test alone would let (True, 128) and (1, 128.0) through to
    the kernels; the element types are checked first."""
    if not isinstance(block, (tuple, list)) or len(block) != 2 \
            or any(isinstance(b, bool) or not isinstance(b, numbers.Integral) for b in block):
        raise TypeError(f"{fn}: block must be a tuple of two ints, one of {FP8_BLOCKS}, got {block!r}")
    block = tuple(int(b) for b in block)
    if block not in FP8_BLOCKS:
        raise ValueError(f"{fn}: block must be one of {FP8_BLOCKS}, got {block!r}")
    return block


def _check_flags(cls: str, result, names: tuple) -> None:
    for name in names:
        check_bool(cls, name, getattr(result, name))


def _check_field(cls: str, name: str, t, dtype: torch.dtype, shape: tuple, data: torch.Tensor) -> None:
    """``t`` a tensor of ``dtype`` and ``shape`` on ``data``'s device, else TypeError /
    ValueError naming cls.name: a result whose data and scales do not belong together (a field
    replaced, a slice of one) would dequantize to wrong values without a word."""
    if not isinstance(t, torch.Tensor) or t.dtype != dtype:
        raise TypeError(f"{cls}: {name} must be a {dtype} tensor, got "
                        f"{t.dtype if isinstance(t, torch.Tensor) else type(t).__name__}")
    if tuple(t.shape) != tuple(shape):
        raise ValueError(f"{cls}: {name} must have shape {tuple(shape)} for its data, got {tuple(t.shape)}")
    if t.device != data.device:
        raise ValueError(f"{cls}: {name} must be on the data's device {data.device}, got {t.device}")


def _data_2d(cls: str, data, dtype: torch.dtype) -> tuple[int, int]:
    if not isinstance(data, torch.Tensor) or data.dtype != dtype or data.dim() != 2:
        raise TypeError(f"{cls}: data must be a 2-D {dtype} tensor, got "
                        f"{f'{data.dim()}-D {data.dtype}' if isinstance(data, torch.Tensor) else type(data).__name__}")
    return tuple(data.shape)


def _scales_shape(rows: int, cols: int, swizzled: bool) -> tuple:
    """A (rows, cols) scale matrix's shape, or its flat swizzled buffer's."""
    if not swizzled:
        return rows, cols
    r, c = padded_shape(rows, cols)
    return (r * c,)


# eq=False: dataclass's __eq__ compares the tensor fields, which raises for more than one element
@dataclasses.dataclass(frozen=True, eq=False)
class FP8BlockQuantized:
    """E4M3 data with one float32 scale per block: x ~= data * scale.

    data: (rows, K) float8_e4m3fn. scales: (cdiv(rows, br), K / bc) float32, row-major.
    """
    data: torch.Tensor
    scales: torch.Tensor
    block: tuple[int, int]
    pow2_scales: bool

    def __post_init__(self):
        rows, cols = _data_2d("FP8BlockQuantized", self.data, torch.float8_e4m3fn)
        block = check_block("FP8BlockQuantized", self.block)
        if cols % block[1]:
            raise ValueError(f"FP8BlockQuantized: block must be one of {FP8_BLOCKS} dividing the data's K = {cols}, "
                             f"got {self.block!r}")
        object.__setattr__(self, "block", block)   # a list given: the tuple (frozen)
        _check_flags("FP8BlockQuantized", self, ("pow2_scales",))
        br, bc = block
        _check_field("FP8BlockQuantized", "scales", self.scales, torch.float32, (-(-rows // br), cols // bc),
                     self.data)

    def dequantize(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """(rows, K) ``data * scale`` in float32, then cast to ``dtype``."""
        _check_dtype("FP8BlockQuantized", dtype)
        return reference.dequantize_fp8_block(self.data, self.scales, self.block).to(dtype)


@dataclasses.dataclass(frozen=True, eq=False)
class MXFP8Quantized:
    """E4M3 data with one E8M0 scale per 32 elements along K: x ~= data * 2^(scale - 127).

    data: (rows, K) float8_e4m3fn. scales: uint8 biased exponents, (rows, K / 32), or when
    ``swizzled`` the flat 128x4-swizzled buffer of that matrix (swizzle.py).
    """
    data: torch.Tensor
    scales: torch.Tensor
    swizzled: bool

    def __post_init__(self):
        rows, cols = _data_2d("MXFP8Quantized", self.data, torch.float8_e4m3fn)
        if cols % MXFP8_BLOCK:
            raise ValueError(f"MXFP8Quantized: the data's K must be a multiple of {MXFP8_BLOCK}, got {cols}")
        _check_flags("MXFP8Quantized", self, ("swizzled",))
        _check_field("MXFP8Quantized", "scales", self.scales, torch.uint8,
                     _scales_shape(rows, cols // MXFP8_BLOCK, self.swizzled), self.data)

    def scales_2d(self) -> torch.Tensor:
        """The (rows, K / 32) scale matrix, whatever the layout of ``scales``."""
        if not self.swizzled:
            return self.scales
        rows, cols = self.data.shape
        return unswizzle_scales(self.scales, rows, cols // MXFP8_BLOCK)

    def dequantize(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        _check_dtype("MXFP8Quantized", dtype)
        return reference.dequantize_mxfp8(self.data, self.scales_2d()).to(dtype)


@dataclasses.dataclass(frozen=True, eq=False)
class NVFP4Quantized:
    """Packed E2M1 data, E4M3 block scales, one float32 per-tensor amax:
    x ~= q * f32(scale) * S_dec with S_dec = 1 / S_enc, S_enc = 2688 / amax (reference.py).

    data: (rows, K / 2) uint8, element 2i in the low nibble. scales: float8_e4m3fn,
    (rows, K / 16), or with ``block_2d`` (cdiv(rows, 16), K / 16); when ``swizzled`` the flat
    128x4-swizzled buffer of the (rows, K / 16) matrix (a 16x16 block's scale repeated on each
    of its rows, the form 1x16-scaled GEMMs read). amax: float32 scalar tensor. With ``rht``
    the data quantizes the Hadamard transform of x (reference.hadamard16).
    """
    data: torch.Tensor
    scales: torch.Tensor
    amax: torch.Tensor
    block_2d: bool
    rht: bool
    swizzled: bool

    def __post_init__(self):
        rows, half = _data_2d("NVFP4Quantized", self.data, torch.uint8)
        if (2 * half) % NVFP4_BLOCK:
            raise ValueError(f"NVFP4Quantized: the data's K (2 x its {half} bytes a row) must be a multiple of "
                             f"{NVFP4_BLOCK}")
        cols = 2 * half // NVFP4_BLOCK
        _check_flags("NVFP4Quantized", self, ("block_2d", "rht", "swizzled"))
        shape = _scales_shape(rows, cols, True) if self.swizzled else \
            ((-(-rows // NVFP4_BLOCK) if self.block_2d else rows), cols)
        _check_field("NVFP4Quantized", "scales", self.scales, torch.float8_e4m3fn, shape, self.data)
        _check_field("NVFP4Quantized", "amax", self.amax, torch.float32, tuple(self.amax.shape)
                     if isinstance(self.amax, torch.Tensor) and self.amax.numel() == 1 else (), self.data)

    def scales_2d(self) -> torch.Tensor:
        """The compact scale matrix ((rows, K/16), or (cdiv(rows, 16), K/16) with block_2d)."""
        if not self.swizzled:
            return self.scales
        rows, cols = self.data.shape[0], self.data.shape[1] * 2
        per_row = unswizzle_scales(self.scales, rows, cols // NVFP4_BLOCK)
        return per_row[::NVFP4_BLOCK].contiguous() if self.block_2d else per_row

    def dequantize(self, dtype: torch.dtype = torch.float32, *, undo_rht: bool = True) -> torch.Tensor:
        """(rows, K) approximation of x; with ``rht``, of x itself (the inverse transform is
        applied) unless ``undo_rht=False``, which returns the transformed values."""
        _check_dtype("NVFP4Quantized", dtype)
        check_bool("NVFP4Quantized.dequantize", "undo_rht", undo_rht)
        return reference.dequantize_nvfp4(self.data, self.scales_2d(), self.amax, self.block_2d,
                                          self.rht, undo_rht).to(dtype)
