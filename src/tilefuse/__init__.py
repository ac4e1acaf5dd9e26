"""tilefuse: fused Triton GPU kernels for PyTorch, with a tuner that proves each fused path
correct and faster (per shape, per GPU) before it is used."""

from . import nn
from .ops.dyt import dyt
from .policy import get_level, level, set_level
from .tuning import tune

__version__ = "0.1.0"

__all__ = ["dyt", "get_level", "level", "set_level", "tune", "__version__"]
