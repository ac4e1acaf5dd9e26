"""nn.Modules built on tilefuse ops, and model converters."""

from .dyt import DyT, convert_layernorm_to_dyt

__all__ = ["DyT", "convert_layernorm_to_dyt"]
