"""DyT (Dynamic Tanh): ``y = weight * tanh(alpha * x) + bias``. Public entry: ``tilefuse.dyt``."""

from .api import dyt

__all__ = ["dyt"]
