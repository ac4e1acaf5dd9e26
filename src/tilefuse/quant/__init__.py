"""Quantizers for the grouped MLP's recipes (docs/specs/grouped_glu_mlp.md, "Quantization recipes"),
usable on their own: FP8 block scaling, MXFP8, NVFP4, and the 128x4 swizzled scale layout.

Each quantizer runs a Triton kernel (CUDA, or the CPU interpreter with TRITON_INTERPRET=1) that
is bitwise equal to the plain-PyTorch rendering of its formula in ``reference``; elsewhere, or
at level 0, it runs that rendering.
"""

from . import reference
from .api import quantize_fp8_block, quantize_mxfp8, quantize_nvfp4
from .swizzle import swizzle_scales, unswizzle_scales
from .tensors import FP8BlockQuantized, MXFP8Quantized, NVFP4Quantized

__all__ = [
    "FP8BlockQuantized", "MXFP8Quantized", "NVFP4Quantized", "quantize_fp8_block",
    "quantize_mxfp8", "quantize_nvfp4", "reference", "swizzle_scales", "unswizzle_scales",
]
