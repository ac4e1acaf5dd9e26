"""nn.Modules built on tilefuse ops, and model converters."""

from .dyt import DyT, convert_layernorm_to_dyt
from .expert_parallel import ExpertParallelGLUMLP
from .grouped_mlp import GroupedGLUMLP
from .hf import HFGroupedGLUExperts, convert_hf_moe_experts
from .so2 import SO2MixingStack

__all__ = ["DyT", "ExpertParallelGLUMLP", "GroupedGLUMLP", "HFGroupedGLUExperts", "SO2MixingStack",
           "convert_hf_moe_experts", "convert_layernorm_to_dyt"]
