"""``GroupedGLUMLP``: the expert MLPs of a mixture-of-experts layer as one module."""

from __future__ import annotations

import math
import warnings

import torch
from torch import nn

from ..ops.grouped_glu_mlp.validate import (FLOAT_DTYPES, check_activation, check_glu_interleave, check_recipe,
                                            check_recipe_shapes)
from ..utils import check_bool, check_dtype_arg

GLU_LAYOUTS = ("interleaved", "halves")
DEFAULT_GLU_INTERLEAVE = 32
# The state-dict key recording the layout fc1's rows were saved in: a 0-d int64 tensor holding
# the interleave block s, or 0 for halves (a tensor, so safetensors and torch.distributed
# checkpoints carry it like the weights).
GLU_LAYOUT_KEY = "glu_layout"


def resolve_glu_layout(where: str, glu_layout, glu_interleave, ffn: int,
                       ffn_name: str = "ffn_hidden_size") -> tuple[str, int | None]:
    """(layout name, glu_interleave for the op) from a module's ``glu_layout`` and
    ``glu_interleave`` arguments; TypeError / ValueError naming the argument.

    ``glu_layout=None`` takes the layout from ``glu_interleave`` (an int: "interleaved", None:
    "halves"). "halves" needs ``glu_interleave`` None or left at its default (32, which is
    then unused); "interleaved" needs an int block size dividing F (named ``ffn_name``)."""
    if glu_layout is None:
        glu_layout = "halves" if glu_interleave is None else "interleaved"
    elif not isinstance(glu_layout, str):
        raise TypeError(f"{where}: glu_layout must be None or one of {GLU_LAYOUTS}, got {type(glu_layout).__name__}")
    elif glu_layout not in GLU_LAYOUTS:
        raise ValueError(f"{where}: glu_layout must be None or one of {GLU_LAYOUTS}, got {glu_layout!r}")
    if glu_layout == "halves":
        if glu_interleave not in (None, DEFAULT_GLU_INTERLEAVE):   # True, False too (1, 0)
            raise ValueError(f"{where}: glu_interleave={glu_interleave!r} is the block size of the interleaved "
                             "layout; leave it unset (or None) with glu_layout='halves'")
        return "halves", None
    if glu_interleave is None:
        raise ValueError(f"{where}: glu_layout='interleaved' needs glu_interleave, the block size s (an int "
                         f"dividing F = {ffn}), got None")
    check_glu_interleave(glu_interleave, ffn, ffn_name)
    return "interleaved", glu_interleave


def record_values(saved: torch.Tensor) -> tuple[list[int] | None, str | None]:
    """A state dict's integer record as ints, or (None, "meta" / "fake") where it is a meta or
    fake tensor (memory estimates, deferred initialisation), which holds no value to check; a
    real record read inside a FakeTensorMode is read as itself."""
    from torch._subclasses.fake_tensor import is_fake, unset_fake_temporarily
    if saved.device.type == "meta" or is_fake(saved):
        return None, "fake" if is_fake(saved) else "meta"
    with unset_fake_temporarily():
        return [int(v) for v in saved.reshape(-1).tolist()], None


def check_expert_args(where: str, sizes, activation, glu_layout, glu_interleave, recipe, dtype=None,
                      bias=False) -> int | None:
    """The constructor checks GroupedGLUMLP, ExpertParallelGLUMLP and HFGroupedGLUExperts
    share, each error naming ``where``. ``sizes``: ((name, value) of E, H, F): positive ints;
    then the activation, the GLU layout (returns the op's glu_interleave: None for halves), the
    recipe with its block rule on H and F, the parameters' dtype (None or one grouped_glu_mlp
    takes) and ``bias`` (a bool)."""
    check_dtype_arg(where, dtype, FLOAT_DTYPES)
    if dtype is None and torch.get_default_dtype() not in FLOAT_DTYPES:   # what the parameters would get
        raise TypeError(f"{where}: dtype None takes torch's default dtype, {torch.get_default_dtype()}, which "
                        f"grouped_glu_mlp does not take; pass dtype= (float32, bfloat16 or float16)")
    check_bool(where, "bias", bias)
    for name, value in sizes:
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{where}: {name} must be a positive int, got {type(value).__name__}")
        if value < 1:
            raise ValueError(f"{where}: {name} must be a positive int, got {value!r}")
    check_activation(activation)
    glu_interleave = resolve_glu_layout(where, glu_layout, glu_interleave, sizes[2][1], sizes[2][0])[1]
    check_recipe(recipe)
    check_recipe_shapes(recipe, sizes[1][1], sizes[2][1], sizes[1][0], sizes[2][0])
    return glu_interleave


def glu_layout_of(module) -> str:
    """A module's GLU layout name, from its glu_interleave (``glu_layout`` property)."""
    return "halves" if module.glu_interleave is None else "interleaved"


def describe_glu_layout(glu_interleave: int | None) -> str:
    return "halves" if not glu_interleave else f"interleaved in blocks of {glu_interleave}"


class GroupedGLUMLP(nn.Module):
    """The E expert MLPs of an MoE layer: grouped GEMM, GLU with router-probability scaling,
    grouped GEMM (docs/specs/grouped_glu_mlp.md).

    Args:
        num_experts: E >= 1.
        hidden_size: H >= 1, the model width (FC1 in, FC2 out).
        ffn_hidden_size: F >= 1, the expert FFN width (FC1 produces 2F: gate and up).
        activation: "swiglu" (silu(gate) * up) or "geglu" (the clamped quick-gelu form, L = 7).
        glu_layout: how FC1's 2F output rows (``fc1_weight[e]``'s rows) hold the gate and up
            halves of the GLU:
            "interleaved": blocks of s gate rows then s up rows, s = ``glu_interleave``
            (the spec's default, s = 32: any 64-aligned tile then holds whole (gate, up)
            pairs); ``glu_interleave=1`` is the alternating [g0, u0, g1, u1, ...] layout.
            "halves": the first F rows are the gate, the last F the up projection (Hugging
            Face's ``gate_up_proj``, split by ``chunk(2, dim=-1)``).
            None (default): "interleaved" when ``glu_interleave`` is an int, "halves" when it
            is None.
        glu_interleave: s for the interleaved layout (must divide F; default 32); None (or
            unset) with ``glu_layout="halves"``.
        bias: learn ``fc1_bias`` (E, 2F) and ``fc2_bias`` (E, H). The FC2 bias is scaled by the
            row's router probability like the rest of the expert's output.
        recipe: None (GEMMs in the parameters' dtype), or "fp8_block", "mxfp8", "nvfp4": every
            GEMM of the forward and backward quantizes its operands along K
            (``tilefuse.grouped_glu_mlp``'s docstring and ops/grouped_glu_mlp/recipes.py).
            hidden_size and ffn_hidden_size must be multiples of 128 / 32 / 16 respectively.
            The parameters stay in their dtype (quantized on every call; once per optimizer
            step with gradient accumulation inside ``tilefuse.reuse_quantized_weights()``:
            the forward's copies, and fp8_block's dgrad copies too).

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

    State dict: the parameters, and ``glu_layout``, a 0-d int64 tensor recording the layout
    fc1's rows are in (s, or 0 for halves). Loading checks it: a state dict recorded with
    another layout raises (rows in one layout read as the other give a wrong result without
    any error), and one without the record (written by hand or converted from
    another library) warns, and reports ``glu_layout`` as a missing key: ``strict=False``
    loads it unchecked, and ``strict=True``, the default, raises after torch has copied its
    tensors in, as for any missing key (the module then holds them unchecked: reload or
    rebuild it after the error). The layout cannot be told from the values. Add it to declare
    the layout of such weights:
    ``state["glu_layout"] = torch.tensor(0)`` for halves (``torch.tensor(s)`` for blocks of
    s), after making sure it is the module's (``tilefuse.nn.HFGroupedGLUExperts`` takes
    Hugging Face's experts as they are). The record is no tensor attribute of the module
    (``glu_layout`` is the layout's name): ``torch.func.functional_call`` takes
    ``dict(module.named_parameters())``, not the state dict.

    torch.compile(fullgraph=True): traced on every path and dtype with recipe None
    (``tilefuse.grouped_glu_mlp``: fp32 / fp16 run the unfused composition as an opaque custom
    op, which reads the counts on the host when the graph runs).

    ``tokens_per_expert`` is never read on the host by the kernels' path. The execution path
    (unfused composition or Triton kernels, and which config) is decided on every call by the
    policy level in force (``tilefuse.level``) and the tuning table, not at construction.

    Example:
        >>> mlp = GroupedGLUMLP(8, 1024, 512)
        >>> counts = torch.tensor([100, 0, 28, 60, 40, 20, 10, 2])   # T = 260
        >>> y = mlp(torch.randn(260, 1024), counts, torch.rand(260))
    """

    glu_layout = property(glu_layout_of)

    def __init__(self, num_experts: int, hidden_size: int, ffn_hidden_size: int, *, activation: str = "swiglu",
                 glu_layout: str | None = None, glu_interleave: int | None = DEFAULT_GLU_INTERLEAVE,
                 bias: bool = False, recipe: str | None = None, device=None, dtype=None):
        super().__init__()
        glu_interleave = check_expert_args(
            "GroupedGLUMLP", (("num_experts", num_experts), ("hidden_size", hidden_size),
                              ("ffn_hidden_size", ffn_hidden_size)), activation, glu_layout, glu_interleave, recipe,
            dtype, bias)
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

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        super()._save_to_state_dict(destination, prefix, keep_vars)
        destination[prefix + GLU_LAYOUT_KEY] = torch.tensor(self.glu_interleave or 0, dtype=torch.int64)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        key = prefix + GLU_LAYOUT_KEY
        ours = describe_glu_layout(self.glu_interleave)
        saved = state_dict.pop(key, None)
        if saved is None:
            # torch passes strict=True to every module and decides at the top: a missing key
            # raises under strict=True and is returned under strict=False. The warning says why.
            missing_keys.append(key)
            warnings.warn(f"GroupedGLUMLP: the state dict has no {key!r}, the record of the GLU layout of "
                          f"{prefix}fc1_weight's rows, so it cannot be checked; this module reads them {ours} "
                          f"(glu_layout={self.glu_layout!r}, glu_interleave={self.glu_interleave}). Rows in another "
                          f"layout give wrong results without an error: construct the module with the weights' "
                          f"layout, and add state[{key!r}] = torch.tensor({self.glu_interleave or 0}) to declare it",
                          UserWarning, stacklevel=4)
        else:
            if not isinstance(saved, torch.Tensor) or saved.numel() != 1 or saved.is_floating_point():
                error_msgs.append(f"GroupedGLUMLP: {key!r} must be a one-element integer tensor (s, or 0 for "
                                  f"halves), got {saved!r}")
                return
            values, kind = record_values(saved)
            recorded = None if values is None else values[0]
            if kind is not None:
                warnings.warn(f"GroupedGLUMLP: the state dict's {key!r} is a {kind} tensor without a value, so "
                              f"the GLU layout of {prefix}fc1_weight's rows cannot be checked; this module reads "
                              f"them {ours}", UserWarning, stacklevel=4)
            # blocks of s = F are the halves layout, row for row (gate j, up F + j)
            halves = (0, self.ffn_hidden_size)
            if recorded is not None and recorded != (self.glu_interleave or 0) and not (
                    recorded in halves and (self.glu_interleave or 0) in halves):
                error_msgs.append(f"GroupedGLUMLP: {prefix}fc1_weight was saved with its GLU rows "
                                  f"{describe_glu_layout(recorded)} ({key} = {recorded}), but this module reads "
                                  f"them {ours}; construct it with "
                                  + ("glu_layout='halves'" if recorded == 0 else
                                     f"glu_layout='interleaved', glu_interleave={recorded}"))
                return
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)

    def extra_repr(self) -> str:
        return (f"num_experts={self.num_experts}, hidden_size={self.hidden_size}, "
                f"ffn_hidden_size={self.ffn_hidden_size}, activation={self.activation!r}, "
                f"glu_layout={self.glu_layout!r}, glu_interleave={self.glu_interleave}, "
                f"bias={self.fc1_bias is not None}, recipe={self.recipe!r}")
