"""Public quantizers: argument checks, then the Triton kernels (CUDA, or the CPU interpreter
with TRITON_INTERPRET=1, at level >= 1) or the plain-PyTorch reference; both give the same
bits. Fake tensors (FakeTensorMode, as memory estimators use it) take the reference: they have
no memory to launch kernels on. Wrapper subclasses (DTensor, ...) are refused by name
(TypeError; _check_plain). No host synchronization: nothing here reads a tensor's values.

Non-finite input is propagated, not rejected (reference.py): a scaling block holding a NaN or
+-inf gets a NaN scale and dequantizes to NaN; with nvfp4's computed amax, one non-finite
element makes the whole tensor NaN.
"""

from __future__ import annotations

import torch

from .. import policy
from ..device import on_tensor_device
from ..utils import check_bool as _check_bool
from ..utils import check_tensor
from . import launch, reference
from .formats import MXFP8_BLOCK, NVFP4_BLOCK
from .swizzle import swizzle_scales
from .tensors import FP8BlockQuantized, MXFP8Quantized, NVFP4Quantized
from .tensors import check_block as _check_block

INPUT_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
# The kernels' tile origins are 32-bit (kernels.tile_origin, fp8_block_kernel's row tiles), and
# so are the sums near them: a grid's padding programs past the last column tile (up to 65534
# of them, launch.rows_cols_grid, times a tile of up to 256 columns) and a scale row count
# (rows + 127) // 128. Below 2**31 - 2**24 none of them wraps (past it, a K just below 2**31
# sends the padding programs to negative, unmasked columns, and 2**31 - 15 rows or more leave
# nvfp4's 2-D scales unwritten).
MAX_EXTENT = 2 ** 31 - 2 ** 24


def _check_x(fn: str, x, block_cols: int) -> None:
    check_tensor(fn, "x", x)
    if x.dtype not in INPUT_DTYPES:
        raise TypeError(f"{fn}: x must be float32, bfloat16 or float16, got {x.dtype}")
    if x.dim() != 2:
        raise ValueError(f"{fn}: x must be 2-D (rows, K), got shape {tuple(x.shape)}")
    if x.shape[1] % block_cols != 0:
        raise ValueError(f"{fn}: x's K = {x.shape[1]} must be a multiple of {block_cols}")
    if max(x.shape) >= MAX_EXTENT:
        raise ValueError(f"{fn}: x's rows and K must each be below 2**31 - 2**24 (the kernels index tiles in 32 "
                         f"bits, with room for the grid's padding), got shape {tuple(x.shape)}")


def _check_plain(fn: str, x, amax=None, stochastic_bits=None) -> None:
    """TypeError naming a wrapper subclass (DTensor, ...: policy.wraps_tensors) among the
    tensors (None skipped; each after its own checks, which name a nested tensor, also a
    wrapper subclass, as not dense): the kernels cannot read its memory, and the reference's
    bit operations give wrong codes on a DTensor without a word (torch 2.13: its rules return
    ``t >> 23`` and ``t << 23`` unshifted, so level 0 would give wrong mxfp8 scales)."""
    policy.refuse_wrapped(fn, "the kernels read memory it does not own, and DTensor's rules drop the reference's "
                              "bit shifts", ("x", "amax", "stochastic_bits"), (x, amax, stochastic_bits))


def _use_kernels(x: torch.Tensor) -> bool:
    """Whether the kernels run for x: kernels are enabled on its device and x has memory to
    launch on (a fake tensor takes the reference, whose torch ops give the outputs' metadata;
    amax and stochastic_bits share x's fake mode)."""
    return policy.kernels_run_on(x)


def _row_major(data: torch.Tensor, scales: torch.Tensor):
    """The reference's outputs laid out as the kernels write them (row-major): its elementwise
    torch ops keep a transposed x's strides, and the GEMMs that take ``.data`` (a recipe's
    backward, which may run at another level than the quantizer) read it row-major."""
    return data.contiguous(), scales.contiguous()


@on_tensor_device
def quantize_fp8_block(x: torch.Tensor, *, block=(1, 128), pow2_scales: bool = False
                       ) -> FP8BlockQuantized:
    """FP8 (E4M3) block scaling with float32 scales (Transformer Engine's Float8BlockScaling).

    Args:
        x: (rows, K) float32/bfloat16/float16, K a multiple of 128; any strides.
        block: (1, 128) (activations, gradients) or (128, 128) (weights); a partial last row
            block takes the amax of the rows it has.
        pow2_scales: round each scale up to a power of two (the encode factor 448/amax down).
            An element of magnitude 248 * 2**120 (about 3.30e38, within 3% of float32's
            largest) or more then dequantizes to +-inf, as the format's rule gives: its
            block's scale is 2**120, its E4M3 code rounds to 256, and 2**128 overflows.

    Returns:
        ``.data`` (rows, K) float8_e4m3fn, ``.scales`` (cdiv(rows, br), K / 128) float32,
        ``.dequantize()``. Formula: reference.py.

    Example:
        >>> q = tilefuse.quant.quantize_fp8_block(torch.randn(256, 512), block=(128, 128))
        >>> q.scales.shape
        torch.Size([2, 4])
    """
    fn = "quantize_fp8_block"
    block = _check_block(fn, block)
    _check_x(fn, x, block[1])
    _check_plain(fn, x)
    _check_bool(fn, "pow2_scales", pow2_scales)
    x = x.detach()
    if _use_kernels(x):
        data, scales = launch.fp8_block(x, block, pow2_scales)
    else:
        data, scales = _row_major(*reference.quantize_fp8_block(x, block, pow2_scales))
    return FP8BlockQuantized(data, scales, block, pow2_scales)


@on_tensor_device
def quantize_mxfp8(x: torch.Tensor, *, swizzle: bool = False) -> MXFP8Quantized:
    """MXFP8: E4M3 data, one E8M0 scale (biased exponent) per 32 elements along K, the
    exponent of amax/448 rounded up when its mantissa is non-zero (Transformer Engine's rule).

    Args:
        x: (rows, K) float32/bfloat16/float16, K a multiple of 32; any strides.
        swizzle: return ``.scales`` as the flat 128x4-swizzled buffer (swizzle.py) instead of
            the (rows, K / 32) matrix.

    Returns:
        ``.data`` (rows, K) float8_e4m3fn, ``.scales`` uint8, ``.dequantize()``. As the format's
        rule gives, an element of magnitude 248 * 2**120 (about 3.30e38, within 3% of
        float32's largest) or more dequantizes to +-inf: its block's scale is 2**120, its
        E4M3 code rounds to 256, and 2**128 overflows. ``.dequantize(dtype)`` casts those
        float32 values: in float16 a magnitude past 65504 is +-inf (a float16 input of 63488
        or more has a block scale of 2**8 and a code that rounds to 256: 65536).

    Example:
        >>> q = tilefuse.quant.quantize_mxfp8(torch.randn(200, 64), swizzle=True)
        >>> q.scales.shape     # 200 rows padded to 256, 2 columns to 4
        torch.Size([1024])
    """
    fn = "quantize_mxfp8"
    _check_x(fn, x, MXFP8_BLOCK)
    _check_plain(fn, x)
    _check_bool(fn, "swizzle", swizzle)
    x = x.detach()
    if _use_kernels(x):
        data, scales = launch.mxfp8(x, swizzle)
    else:
        data, scales = _row_major(*reference.quantize_mxfp8(x))
        if swizzle:
            scales = swizzle_scales(scales)
    return MXFP8Quantized(data, scales, swizzle)


@on_tensor_device
def quantize_nvfp4(x: torch.Tensor, *, amax: torch.Tensor | None = None, block_2d: bool = False,
                   rht: bool = False, stochastic_bits: torch.Tensor | None = None,
                   swizzle: bool = False) -> NVFP4Quantized:
    """NVFP4: packed E2M1 data, one E4M3 scale per 16 elements (per 16x16 block with
    ``block_2d``), one float32 per-tensor scale from ``amax``; the spec's recipe exactly
    (reference.py: S_enc = 2688/amax, the fp32 constant 1/6, IEEE division, RNE casts).

    Args:
        x: (rows, K) float32/bfloat16/float16, K a multiple of 16; any strides.
        amax: float32-convertible one-element tensor on x's device (e.g. a per-expert amax
            computed elsewhere), or None to compute amax(|x|) here (two extra launches). Its
            magnitude is used (a negative amax as its absolute value): it should bound |x|
            (|transformed x| with ``rht``); larger finite values saturate; an infinite or NaN
            amax makes every output NaN (the per-tensor scale is then not a number). Below
            about 7.9e-36 (2688 / float32's largest) S_enc is capped at float32's largest
            (Transformer Engine's rule; the spec is silent there). The accuracy holds until
            a block's amax falls below about 1.8e-38 (6 / float32's largest, where a block's
            encode factor reaches the cap too): blocks of values near 1e-39 come back tens of
            percent off, smaller ones as 0. fp8_block and mxfp8 keep float32's normal
            values; they lose accuracy on subnormals below about 1e-40 and return 0 below
            about 5e-42 (their own scales' float32 caps).
        block_2d: 16x16 scaling blocks (weights); a partial last row block takes the amax of
            the rows it has.
        rht: quantize the 16-point random Hadamard transform of x along K
            (reference.hadamard16: Sylvester H16 with Transformer Engine's fixed sign vector,
            scale 1/4), as for wgrad copies; dequantize() undoes it. The transform adds up
            to 16 elements before its 1/4: a group whose magnitudes sum past float32's largest
            value (about 3.4e38) overflows there, and the amax, hence every output, is NaN.
        stochastic_bits: (rows, K) uint32 (or int32, read as uint32) random bits, one per
            element, for stochastic rounding of the E2M1 data: round |v| up to the next grid
            point iff bits < floor(t * 2^32), t in [0, 1) its exact position between the two
            neighbours (scales stay round-to-nearest). None: round half to even.
        swizzle: return ``.scales`` as the flat 128x4-swizzled buffer of the (rows, K / 16)
            matrix (with block_2d each block's scale repeated on its 16 rows).

    Returns:
        ``.data`` (rows, K / 2) uint8, ``.scales`` float8_e4m3fn, ``.amax`` float32 scalar
        tensor, ``.dequantize()``.

    Example:
        >>> q = tilefuse.quant.quantize_nvfp4(torch.randn(64, 256), block_2d=True)
        >>> q.data.shape, q.scales.shape
        (torch.Size([64, 128]), torch.Size([4, 16]))
    """
    fn = "quantize_nvfp4"
    _check_x(fn, x, NVFP4_BLOCK)
    _check_plain(fn, x)
    for name, v in (("block_2d", block_2d), ("rht", rht), ("swizzle", swizzle)):
        _check_bool(fn, name, v)
    if amax is not None:
        check_tensor(fn, "amax", amax, "a torch.Tensor or None")
        if not amax.is_floating_point():
            raise TypeError(f"{fn}: amax must be a floating-point tensor, got {amax.dtype}")
        if amax.numel() != 1:
            raise ValueError(f"{fn}: amax must have exactly one element, got shape {tuple(amax.shape)}")
        if amax.device != x.device:
            raise ValueError(f"{fn}: amax is on {amax.device} but x is on {x.device}")
        _check_plain(fn, None, amax)
        amax = amax.detach().to(torch.float32).reshape(()).abs()   # a new tensor: the caller's is untouched
    if stochastic_bits is not None:
        check_tensor(fn, "stochastic_bits", stochastic_bits, "a torch.Tensor or None")
        if stochastic_bits.dtype not in (torch.uint32, torch.int32):
            raise TypeError(f"{fn}: stochastic_bits must be uint32 (or int32), got {stochastic_bits.dtype}")
        if stochastic_bits.shape != x.shape:
            raise ValueError(f"{fn}: stochastic_bits must have x's shape {tuple(x.shape)}, "
                             f"got {tuple(stochastic_bits.shape)}")
        if stochastic_bits.device != x.device:
            raise ValueError(f"{fn}: stochastic_bits is on {stochastic_bits.device} but x is on {x.device}")
        _check_plain(fn, None, None, stochastic_bits)
    x = x.detach()
    if _use_kernels(x):
        data, scales, amax = launch.nvfp4(x, amax, block_2d, rht, stochastic_bits, swizzle)
    else:
        data, scales, amax = reference.quantize_nvfp4(x, amax, block_2d, rht, stochastic_bits)
        data, scales = _row_major(data, scales)
        if swizzle:
            scales = swizzle_scales(reference.nvfp4_scales_per_row(scales, x.shape[0], block_2d))
    return NVFP4Quantized(data, scales, amax, block_2d, rht, swizzle)

