"""Hugging Face mixture-of-experts adapter: ``HFGroupedGLUExperts`` runs an HF experts module's
computation through ``tilefuse.grouped_glu_mlp``, and ``convert_hf_moe_experts`` swaps it into a
loaded model in place (what Liger-Kernel's ``apply_liger_kernel_to_*(model=...)`` helpers do
for their kernels).

The HF interface it takes (transformers 5.x: ``Qwen3MoeExperts``, ``MixtralExperts``, and the
other experts classes set up by ``transformers.integrations.moe.use_experts_implementation``
with its defaults):

- parameters ``gate_up_proj`` (E, 2F, H) and ``down_proj`` (E, H, F), (out, in) like
  ``nn.Linear.weight``; the gate is the first F rows of ``gate_up_proj[e]``, the up
  projection the last F (``chunk(2, dim=-1)``: the "halves" GLU layout); no biases. The
  decorator's ``is_concatenated=False`` (gate and up alternating) is refused: HF's default
  gate splits in halves whatever the flag says, so HF's paths disagree on such a module;
  nothing else may be held but ``act_fn`` (an extra parameter, buffer or submodule is
  refused, not dropped);
- ``forward(hidden_states (T, H), top_k_index (T, K) int, top_k_weights (T, K))``:
  ``out[t] = sum_k w[t, k] * down_e(act(gate_e(x_t)) * up_e(x_t))`` with e = top_k_index[t, k];
  an index equal to E (the expert-parallel marker of a slot owned by another rank)
  contributes nothing, a larger one is an error; ``act_fn`` is ``ACT2FN[config.hidden_act]``,
  SiLU for the supported models (LFM2-MoE's holds the function ``F.silu``).

transformers is never imported by this module at tilefuse import time; ``convert_hf_moe_experts``
imports it (when installed) only to compare an experts class's gate with HF's default.
"""

from __future__ import annotations

import logging

import torch
from torch import nn

from ..utils import check_tensor, fx_module_node, fx_proxy_in
from .grouped_mlp import check_expert_args, glu_layout_of

logger = logging.getLogger("tilefuse.nn")

_WHERE = "HFGroupedGLUExperts"


class HFGroupedGLUExperts(nn.Module):
    """A Hugging Face experts module (``Qwen3MoeExperts`` / ``MixtralExperts`` style) on
    ``tilefuse.grouped_glu_mlp``: the same parameter names, shapes and forward signature, so
    HF's MoE block calls it unchanged and its state dict keys stay HF's.

    Args:
        num_experts: E; hidden_dim: H; intermediate_dim: F (HF's ``moe_intermediate_size``,
            ``intermediate_size`` for Mixtral).
        glu_layout: "halves" (HF's layout: gate rows first, then up) or "interleaved" with
            ``glu_interleave`` (1: gate and up alternating; ``from_hf`` takes halves only).
        activation: "swiglu" (HF's SiLU experts).
        recipe: None or a quantized recipe of ``tilefuse.grouped_glu_mlp``.

    Parameters: ``gate_up_proj`` (E, 2F, H), ``down_proj`` (E, H, F), uninitialised (an
    adapter takes an HF module's parameters: ``from_hf``); no layout record is added to the
    state dict (the layout is fixed by the HF class the weights come from).

    Forward: ``hidden_states`` (T, H); ``top_k_index`` (T, K) int32/int64, values in [0, E]
    (E: a slot dropped, as HF's experts skip it); ``top_k_weights`` (T, K) float, on the same
    device. Returns (T, H) in ``hidden_states``' dtype. Steps, all on the device (no host
    synchronization of their own): the T*K (token, slot) pairs are sorted by expert id
    (stable sort), the counts per expert come from ``searchsorted`` of the sorted ids (the
    dropped slots, sorted last, are given to the last expert with weight 0 and their rows of x
    and y zeroed, so the counts sum to T*K as grouped_glu_mlp requires and those rows add
    exactly 0 and take no gradient, even where the last expert would overflow on them), the
    gathered token rows run through ``grouped_glu_mlp`` with the routing weights as its
    ``probs``, and each token's K rows are gathered back and summed (a gather and a reshape
    sum: deterministic, no atomics). ``probs`` scales the GLU output before the down
    projection, HF scales the projection's output: equal by linearity because HF experts have
    no down-projection bias (a bias would be scaled too; the module has none).
    ``hidden_states`` are cast to the weights' dtype (as HF's grouped_mm path does);
    ``top_k_weights`` to float32 unless already in the weights' dtype.

    Example:
        >>> moe.experts = HFGroupedGLUExperts.from_hf(moe.experts)   # or convert_hf_moe_experts(model)
    """

    glu_layout = property(glu_layout_of)

    def __init__(self, num_experts: int, hidden_dim: int, intermediate_dim: int, *, glu_layout: str = "halves",
                 glu_interleave: int | None = None, activation: str = "swiglu", recipe: str | None = None,
                 device=None, dtype=None):
        super().__init__()
        self.glu_interleave = check_expert_args(
            _WHERE, (("num_experts", num_experts), ("hidden_dim", hidden_dim), ("intermediate_dim", intermediate_dim)),
            activation, glu_layout, glu_interleave, recipe, dtype)
        self.num_experts, self.hidden_dim, self.intermediate_dim = num_experts, hidden_dim, intermediate_dim
        self.activation, self.recipe = activation, recipe
        factory = {"device": device, "dtype": dtype}
        self.gate_up_proj = nn.Parameter(torch.empty(num_experts, 2 * intermediate_dim, hidden_dim, **factory))
        self.down_proj = nn.Parameter(torch.empty(num_experts, hidden_dim, intermediate_dim, **factory))

    @classmethod
    def from_hf(cls, experts: nn.Module, *, recipe: str | None = None, name: str = "experts") -> "HFGroupedGLUExperts":
        """The adapter of an HF experts module, holding the same Parameter objects (no copy:
        optimizer state, sharing and device placement carry over). ValueError naming the
        module (``name``) and the attribute when its computation is not one grouped_glu_mlp
        runs (``supported``)."""
        reason = unsupported_reason(experts)
        if reason:
            raise ValueError(f"convert_hf_moe_experts: {name} ({type(experts).__name__}) is not supported: {reason}")
        num_experts, two_f, hidden = experts.gate_up_proj.shape
        new = cls(num_experts, hidden, two_f // 2, glu_layout="halves", recipe=recipe, device="meta")
        new.gate_up_proj = experts.gate_up_proj
        new.down_proj = experts.down_proj
        return new.train(experts.training)   # the replaced module's train / eval state

    def forward(self, hidden_states: torch.Tensor, top_k_index: torch.Tensor,
                top_k_weights: torch.Tensor) -> torch.Tensor:
        from ..ops.grouped_glu_mlp.api import grouped_glu_mlp
        proxy = fx_proxy_in(hidden_states, top_k_index, top_k_weights)
        if proxy is not None:   # torch.fx.symbolic_trace: the module is one leaf node
            return fx_module_node(self, _WHERE, proxy, hidden_states, top_k_index, top_k_weights)
        _check_routing(hidden_states, top_k_index, top_k_weights, self.hidden_dim)
        n_tokens, top_k = top_k_index.shape
        n_experts, device = self.num_experts, hidden_states.device
        weight_dtype = self.gate_up_proj.dtype

        # (token, slot) pairs sorted by expert (stable: a token's rows keep their slot order).
        expert_ids, order = torch.sort(top_k_index.reshape(-1), stable=True)
        # ids in [0, E] (sorted: the first and the last decide); one past E is a routing bug,
        # not a dropped slot (HF's own experts raise for it)
        torch._assert_async((expert_ids[:1] >= 0).all() & (expert_ids[-1:] <= n_experts).all(),
                            "HFGroupedGLUExperts: top_k_index must be in [0, E] (E marks a dropped slot)")
        kept = expert_ids < n_experts
        # Dropped slots (id E, sorted last) join the last expert with weight 0: the counts then
        # sum to T*K with no host read. ends[e] = number of ids <= e.
        clamped = expert_ids.clamp(max=n_experts - 1)
        ends = torch.searchsorted(clamped, torch.arange(1, n_experts + 1, device=device, dtype=clamped.dtype))
        counts = torch.diff(ends, prepend=ends.new_zeros(1))

        # A dropped slot's rows are zeros in x and in the gradient dy, not only given weight 0:
        # where the last expert overflows on such a row (fp16: its fc1 output, or dy @ fc2 in
        # the backward), 0 * inf = NaN would reach the token's sum and that expert's weight
        # gradients, where HF, skipping the slot, stays finite; and under a recipe the rows
        # would enter the quantizers' statistics (x in nvfp4's per-tensor amax, x and dy in the
        # last expert's column-wise block scales). x's rows come from a zero row appended to
        # hidden_states (one (T, H) copy, not a pass over the T*K gathered rows); y's rows of a
        # zero x are zeros already (no bias; GLU(0) = 0), and _ZeroDroppedGrad zeroes dy's.
        rows = torch.where(kept, order // top_k, n_tokens)
        x = torch.cat([hidden_states, hidden_states.new_zeros(1, hidden_states.shape[1])])[rows].to(weight_dtype)
        probs = top_k_weights.reshape(-1)[order]
        if probs.dtype not in (torch.float32, weight_dtype):
            probs = probs.float()
        probs = probs.masked_fill(~kept, 0)

        y = grouped_glu_mlp(x, counts, probs, self.gate_up_proj, self.down_proj, activation=self.activation,
                            glu_interleave=self.glu_interleave, recipe=self.recipe)
        y = _ZeroDroppedGrad.apply(y, kept)
        # Back to (token, slot) order, then each token's K rows summed.
        unsorted = torch.empty_like(y)
        unsorted[order] = y            # order is a permutation: every row written once
        out = unsorted.view(n_tokens, top_k, y.shape[1]).sum(1)
        return out.to(hidden_states.dtype)

    def extra_repr(self) -> str:
        return (f"num_experts={self.num_experts}, hidden_dim={self.hidden_dim}, "
                f"intermediate_dim={self.intermediate_dim}, glu_layout={self.glu_layout!r}, "
                f"glu_interleave={self.glu_interleave}, activation={self.activation!r}, recipe={self.recipe!r}")


class _ZeroDroppedGrad(torch.autograd.Function):
    """y as it is; its gradient with the rows of dropped slots (``kept`` False) zeroed."""

    @staticmethod
    def forward(ctx, y, kept):
        ctx.save_for_backward(kept)
        return y.view_as(y)

    @staticmethod
    def backward(ctx, dy):
        kept, = ctx.saved_tensors
        return dy.masked_fill(~kept[:, None], 0), None


def _check_routing(hidden_states, top_k_index, top_k_weights, hidden_dim: int) -> None:
    for name, t in (("hidden_states", hidden_states), ("top_k_index", top_k_index),
                    ("top_k_weights", top_k_weights)):
        check_tensor(_WHERE, name, t)
    if not hidden_states.is_floating_point():   # it is cast to the experts' dtype: ints / bools would pass silently
        raise TypeError(f"{_WHERE}: hidden_states must be a float tensor, got {hidden_states.dtype}")
    if hidden_states.dim() != 2 or hidden_states.shape[1] != hidden_dim:
        raise ValueError(f"{_WHERE}: hidden_states must be (T, H) with H = {hidden_dim}, "
                         f"got shape {tuple(hidden_states.shape)}")
    if top_k_index.dtype not in (torch.int32, torch.int64):
        raise TypeError(f"{_WHERE}: top_k_index must be int32 or int64, got {top_k_index.dtype}")
    if top_k_index.dim() != 2 or top_k_index.shape[0] != hidden_states.shape[0]:
        raise ValueError(f"{_WHERE}: top_k_index must be (T, K) with T = hidden_states.shape[0] = "
                         f"{hidden_states.shape[0]}, got shape {tuple(top_k_index.shape)}")
    if not top_k_weights.is_floating_point():
        raise TypeError(f"{_WHERE}: top_k_weights must be a float tensor, got {top_k_weights.dtype}")
    if tuple(top_k_weights.shape) != tuple(top_k_index.shape):
        raise ValueError(f"{_WHERE}: top_k_weights must have top_k_index's shape {tuple(top_k_index.shape)}, "
                         f"got {tuple(top_k_weights.shape)}")
    for name, t in (("top_k_index", top_k_index), ("top_k_weights", top_k_weights)):
        if t.device != hidden_states.device:
            raise ValueError(f"{_WHERE}: {name} is on {t.device} but hidden_states is on {hidden_states.device}")


def is_hf_experts(module: nn.Module) -> bool:
    """Whether ``module`` is an HF experts module of the fused 3-D layout: ``gate_up_proj`` and
    ``down_proj`` 3-D parameters, and the attributes transformers'
    ``use_experts_implementation`` sets (``has_gate``, ``is_concatenated``, ...)."""
    gate_up, down = getattr(module, "gate_up_proj", None), getattr(module, "down_proj", None)
    return (isinstance(gate_up, nn.Parameter) and isinstance(down, nn.Parameter) and gate_up.dim() == 3
            and down.dim() == 3 and hasattr(module, "has_gate") and hasattr(module, "is_concatenated"))


def _default_gate():
    try:
        from transformers.integrations import moe
    except ImportError:
        return None
    return getattr(moe, "_default_apply_gate", None)


def unsupported_reason(experts: nn.Module) -> str | None:
    """Why ``grouped_glu_mlp`` cannot run this HF experts module's computation, or None."""
    if not is_hf_experts(experts):
        return ("not a Hugging Face experts module (3-D gate_up_proj / down_proj parameters set up by "
                "transformers' use_experts_implementation)")
    # is_concatenated=False (gate and up alternating) is refused too: HF's default _apply_gate
    # splits [gate; up] in halves whatever the flag says (only its sonicmoe path reads the
    # flag), and a class with its own gate is refused below, so no HF path computes it as stored.
    for attr, wanted in (("has_gate", True), ("has_bias", False), ("is_transposed", False),
                         ("has_post_expert_norm", False), ("is_concatenated", True)):
        if getattr(experts, attr, wanted) != wanted:
            return f"{attr}={getattr(experts, attr)!r} (supported: {attr}={wanted})"
    # Whatever else it holds would be dropped by the adapter (from the model's parameters, its
    # optimizer and its checkpoints) and left out of the computation.
    extra = ([f"parameter {k!r}" for k, v in experts._parameters.items()
              if v is not None and k not in ("gate_up_proj", "down_proj")]
             + [f"buffer {k!r}" for k, v in experts._buffers.items() if v is not None]
             + [f"submodule {k!r}" for k, v in experts._modules.items() if v is not None and k != "act_fn"])
    if extra:
        return f"it holds {', '.join(extra)} besides gate_up_proj, down_proj and act_fn"
    gate = getattr(type(experts), "_apply_gate", None)
    default = _default_gate()
    if gate is not None and default is not None and gate is not default:
        return f"it defines its own _apply_gate ({type(experts).__name__}._apply_gate), not HF's default GLU"
    act = getattr(experts, "act_fn", None)
    # the class itself, not a subclass: a subclass may compute something else
    # (or the function itself: LFM2-MoE's experts hold F.silu)
    hf_silu = type(act).__name__ == "SiLUActivation" and type(act).__module__.startswith("transformers.")
    if not (type(act) is nn.SiLU or act is nn.functional.silu or hf_silu):
        return (f"act_fn is {type(act).__name__}; grouped_glu_mlp's GLUs are SwiGLU (SiLU gate) and its "
                "clamped GeGLU")
    num_experts, two_f, hidden = experts.gate_up_proj.shape
    if two_f % 2 or tuple(experts.down_proj.shape) != (num_experts, hidden, two_f // 2):
        return (f"gate_up_proj {tuple(experts.gate_up_proj.shape)} and down_proj {tuple(experts.down_proj.shape)} "
                "are not (E, 2F, H) and (E, H, F)")
    from ..ops.grouped_glu_mlp.validate import FLOAT_DTYPES
    dtypes = {experts.gate_up_proj.dtype, experts.down_proj.dtype}
    if not dtypes <= set(FLOAT_DTYPES) or len(dtypes) != 1:
        return (f"its parameters are {', '.join(sorted(str(d) for d in dtypes))}; grouped_glu_mlp takes one of "
                "float32, bfloat16, float16 (convert the model's dtype first)")
    return None


def convert_hf_moe_experts(model: nn.Module, *, recipe: str | None = None) -> nn.Module:
    """Replace, in place, every Hugging Face experts module of ``model`` (``Qwen3MoeExperts``,
    ``MixtralExperts``, ...: ``is_hf_experts``) with an ``HFGroupedGLUExperts`` holding the
    same parameters. Returns ``model``, or, where ``model`` is itself an experts module (it
    cannot replace itself in place), its adapter; the number replaced is logged (logger
    ``tilefuse.nn``, INFO).

    The model keeps its state dict keys (``...mlp.experts.gate_up_proj``), so
    ``save_pretrained`` / ``load_state_dict`` work as before, and its router, which still
    passes ``(hidden_states, top_k_index, top_k_weights)`` to ``mlp.experts``.

    Raises ValueError naming the module when an experts module's computation is not one
    grouped_glu_mlp runs (biases, transposed weights, a custom gate such as gpt-oss's,
    an activation other than SiLU: ``unsupported_reason``), and when ``model`` holds no
    experts module at all. Nothing is replaced unless every experts module is supported.

    Example:
        >>> model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen3-30B-A3B")
        >>> convert_hf_moe_experts(model)
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"convert_hf_moe_experts: model must be a torch.nn.Module, got {type(model).__name__}")
    found: dict[int, tuple[nn.Module, str]] = {}
    for name, module in model.named_modules(remove_duplicate=True):
        if is_hf_experts(module):
            found[id(module)] = (module, name)
    if not found:
        raise ValueError(f"convert_hf_moe_experts: {type(model).__name__} holds no Hugging Face experts module "
                         "(3-D gate_up_proj / down_proj parameters set up by transformers' "
                         "use_experts_implementation); nothing to replace")
    adapters = {key: HFGroupedGLUExperts.from_hf(module, recipe=recipe, name=name or "model")
                for key, (module, name) in found.items()}
    if id(model) in adapters:
        logger.info("convert_hf_moe_experts: replaced 1 experts module")
        return adapters[id(model)]
    for parent in list(model.modules()):
        for child_name, child in list(parent._modules.items()):
            if child is not None and id(child) in adapters:
                setattr(parent, child_name, adapters[id(child)])
    logger.info("convert_hf_moe_experts: replaced %d experts module(s) (%s)", len(adapters),
                ", ".join(sorted({type(m).__name__ for m, _ in found.values()})))
    return model
