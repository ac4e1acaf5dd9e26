"""grouped_glu_mlp: the mixture-of-experts expert MLP (grouped GEMM + GLU + router probs)."""

from .api import grouped_glu_mlp

__all__ = ["grouped_glu_mlp"]
