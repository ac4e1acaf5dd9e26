"""Quantizers for the grouped MLP's recipes (specs/grouped_glu_mlp.md, "Quantization recipes"):
the plain-PyTorch renderings of the formulas and the 128x4 swizzled scale layout."""

from . import reference
from .swizzle import swizzle_scales, unswizzle_scales

__all__ = ["reference", "swizzle_scales", "unswizzle_scales"]
