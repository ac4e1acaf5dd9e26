"""nn.Modules built on tilefuse ops, and model converters."""

from .dyt import DyT, convert_layernorm_to_dyt
from .grouped_mlp import GroupedGLUMLP
from .so2 import SO2MixingStack

__all__ = ["DyT", "GroupedGLUMLP", "SO2MixingStack", "convert_layernorm_to_dyt"]
