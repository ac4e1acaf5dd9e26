"""tilefuse: fused Triton GPU kernels for PyTorch, with a tuner that proves each fused path
correct and faster (per shape, per GPU) before it is used."""

from . import nn, quant
from ._version import __version__
from .ops.dyt import dyt
from .ops.grouped_glu_mlp import grouped_glu_mlp
from .ops.grouped_glu_mlp.recipes import reuse_quantized_weights
from .ops.so2_mixing_stack import so2_mixing_stack
from .policy import get_level, level, set_level
from .tuning import tune

__all__ = ["nn", "dyt", "get_level", "grouped_glu_mlp", "level", "quant", "reuse_quantized_weights", "set_level", "so2_mixing_stack", "tune", "__version__"]
