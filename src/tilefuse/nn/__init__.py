"""nn.Modules built on tilefuse ops, and model converters."""

from .dyt import DyT, convert_layernorm_to_dyt
from .so2 import SO2MixingStack

__all__ = ["DyT", "SO2MixingStack", "convert_layernorm_to_dyt"]
