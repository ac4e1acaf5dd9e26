"""``GroupedGLUMLP``: the expert MLPs of a mixture-of-experts layer as one module."""

from __future__ import annotations

import math

import torch
from torch import nn

from ..ops.grouped_glu_mlp.validate import check_activation, check_glu_interleave, check_recipe, check_recipe_shapes


class GroupedGLUMLP(nn.Module):
    """The E expert MLPs of an MoE layer: grouped GEMM, GLU with router-probability scaling,
    grouped GEMM (specs/grouped_glu_mlp.md).

    Args:
        num_experts: E >= 1.
        hidden_size: H >= 1, the model width (FC1 in, FC2 out).
        ffn_hidden_size: F >= 1, the expert FFN width (FC1 produces 2F: gate and up).
        activation: "swiglu" (silu(gate) * up) or "geglu" (the clamped quick-gelu form, L = 7).
        glu_interleave: s, FC1's output columns come in blocks of s gate then s up columns
            (must divide F); None for halves (gate = first F columns). 32 is the default of the
            spec: any 64-aligned tile then holds whole (gate, up) pairs.
        bias: learn ``fc1_bias`` (E, 2F) and ``fc2_bias`` (E, H). The FC2 bias is scaled by the
            row's router probability like the rest of the expert's output.
        recipe: None (GEMMs in the parameters' dtype), or "fp8_block", "mxfp8", "nvfp4": every
            GEMM of the forward and backward quantizes its operands along K
            (``tilefuse.grouped_glu_mlp``'s docstring and ops/grouped_glu_mlp/recipes.py).
            hidden_size and ffn_hidden_size must be multiples of 128 / 32 / 16 respectively.
            The parameters stay in their dtype (quantized on every call).

    Parameters (per expert, (out, in) like ``nn.Linear.weight``):
        ``fc1_weight`` (E, 2F, H), ``fc2_weight`` (E, H, F), ``fc1_bias`` (E, 2F) or None,
        ``fc2_bias`` (E, H) or None.

    Initialisation (``reset_parameters``): each expert as a fresh ``nn.Linear`` of its shape:
    weights and biases ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with fan_in = H for FC1 and F for
    FC2. (``nn.Linear`` draws its weight with ``kaiming_uniform_(a=sqrt(5))``, whose bound
    gain * sqrt(3 / fan_in) with gain = sqrt(2 / (1 + 5)) is the same 1/sqrt(fan_in).) Large
    MoE recipes often use N(0, 0.02) instead; re-initialise the parameters for that.

    Shapes (T tokens already permuted so that expert e owns a contiguous block of rows, in
    expert order; T may be 0):
        forward(x (T, H), tokens_per_expert (E,) int32/int64 on x's device summing to T,
        probs (T,) float32 or x's dtype) -> y (T, H) in x's dtype.

    ``tokens_per_expert`` is never read on the host by the kernels' path. The execution path
    (unfused composition or Triton kernels, and which config) is decided on every call by the
    policy level in force (``tilefuse.level``) and the tuning table, not at construction.

    Example:
        >>> mlp = GroupedGLUMLP(8, 1024, 512)
        >>> counts = torch.tensor([100, 0, 28, 60, 40, 20, 10, 2])   # T = 260
        >>> y = mlp(torch.randn(260, 1024), counts, torch.rand(260))
    """

    def __init__(self, num_experts: int, hidden_size: int, ffn_hidden_size: int, *, activation: str = "swiglu",
                 glu_interleave: int | None = 32, bias: bool = False, recipe: str | None = None, device=None,
                 dtype=None):
        super().__init__()
        for name, value in (("num_experts", num_experts), ("hidden_size", hidden_size),
                            ("ffn_hidden_size", ffn_hidden_size)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"GroupedGLUMLP: {name} must be a positive int, got {value!r}")
        if not isinstance(bias, bool):
            raise TypeError(f"GroupedGLUMLP: bias must be a bool, got {type(bias).__name__}")
        check_activation(activation)
        check_glu_interleave(glu_interleave, ffn_hidden_size)
        check_recipe(recipe)
        check_recipe_shapes(recipe, hidden_size, ffn_hidden_size)
        self.num_experts, self.hidden_size, self.ffn_hidden_size = num_experts, hidden_size, ffn_hidden_size
        self.activation, self.glu_interleave, self.recipe = activation, glu_interleave, recipe
        factory = {"device": device, "dtype": dtype}
        e, h, f = num_experts, hidden_size, ffn_hidden_size
        self.fc1_weight = nn.Parameter(torch.empty(e, 2 * f, h, **factory))
        self.fc2_weight = nn.Parameter(torch.empty(e, h, f, **factory))
        if bias:
            self.fc1_bias = nn.Parameter(torch.empty(e, 2 * f, **factory))
            self.fc2_bias = nn.Parameter(torch.empty(e, h, **factory))
        else:
            self.register_parameter("fc1_bias", None)
            self.register_parameter("fc2_bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        with torch.no_grad():
            for weight, bias, fan_in in ((self.fc1_weight, self.fc1_bias, self.hidden_size),
                                         (self.fc2_weight, self.fc2_bias, self.ffn_hidden_size)):
                bound = 1.0 / math.sqrt(fan_in)
                weight.uniform_(-bound, bound)
                if bias is not None:
                    bias.uniform_(-bound, bound)

    def forward(self, x: torch.Tensor, tokens_per_expert: torch.Tensor, probs: torch.Tensor) -> torch.Tensor:
        # Imported at call time: constructing the module does not import the kernels, and tests
        # can substitute the functional entry point (sys.modules).
        from ..ops.grouped_glu_mlp.api import grouped_glu_mlp
        return grouped_glu_mlp(x, tokens_per_expert, probs, self.fc1_weight, self.fc2_weight,
                               activation=self.activation, glu_interleave=self.glu_interleave,
                               fc1_bias=self.fc1_bias, fc2_bias=self.fc2_bias, recipe=self.recipe)

    def extra_repr(self) -> str:
        return (f"num_experts={self.num_experts}, hidden_size={self.hidden_size}, "
                f"ffn_hidden_size={self.ffn_hidden_size}, activation={self.activation!r}, "
                f"glu_interleave={self.glu_interleave}, bias={self.fc1_bias is not None}, recipe={self.recipe!r}")
