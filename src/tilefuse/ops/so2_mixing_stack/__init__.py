"""so2_mixing_stack: the gated SO(2) mixing stack of equivariant interatomic potentials."""

from .api import so2_mixing_stack

__all__ = ["so2_mixing_stack"]
