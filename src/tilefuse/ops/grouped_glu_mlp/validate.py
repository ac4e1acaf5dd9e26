"""Argument checks of grouped_glu_mlp: TypeError / ValueError naming the argument.

Shapes, dtypes, devices and Python values only: no tensor value is read, so the checks never
synchronize with the device and trace cleanly under torch.compile. What they cannot see:

- ``sum(tokens_per_expert) == T`` and ``tokens_per_expert >= 0``. Checking them here would read
  the counts on the host (a synchronization on CUDA, a graph break under torch.compile). They
  are checked where the counts are already on hand: on the device in the kernels' path (a
  device-side check in the launchers) and in the unfused ``torch._grouped_mm`` path
  (``reference.assert_counts_on_device``, ``torch._assert_async``); on the host, with a
  ValueError naming ``tokens_per_expert``, in the reference and the unfused per-expert loop,
  which read the counts anyway.
- Values are finite (a NaN propagates; it is never cleaned up). ``probs`` need not sum to
  anything: any per-row scale is accepted. Where one is not, its NaN may reach more outputs
  than level 0's: a quantized block's scale (api.py), and on the compose route's Gluon weight
  gradients (ws_wgrad.py) an expert's last partial chunk of 64 tokens, which multiplies zeros
  by the next expert's first tokens, so a NaN or inf there reaches this expert's dW too
  (torch._grouped_mm's keep it to the next expert's).

Decisions:

- x is float32, bfloat16 or float16 (the spec's dtypes; float64 is for the reference only and
  is refused here). The weights and biases share x's dtype; probs is float32 or x's dtype
  (routers usually produce float32 probabilities).
- tokens_per_expert is int32 or int64 (what ``bincount``/``histc().int()``/``cumsum`` give;
  the kernels build int32/int64 offsets from it), 1-D with E = fc1_weight.shape[0] entries.
- E >= 1, H >= 1, F >= 1: model dimensions, not batch sizes. T may be 0 (empty result).
- Strides are not checked: every layout is accepted (views: transposed, sliced, expanded).
  Each path copies what it cannot read as laid out, and only that (launch.kernel_layouts
  for the kernels, reference._row_major for torch._grouped_mm).
- recipe: None, "fp8_block", "mxfp8" or "nvfp4" (recipes.py). A recipe quantizes along H and
  F in blocks of 128 (fp8_block), 32 (mxfp8) or 16 (nvfp4), so H and F must be multiples of
  that block (no partial scaling blocks). Any of the three input dtypes may be quantized.
"""

from __future__ import annotations

import torch

from ...utils import check_tensor
from .recipes import BLOCK, RECIPES
from .reference import ACTIVATIONS

FLOAT_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
COUNT_DTYPES = (torch.int32, torch.int64)
QUANTIZED_RECIPES = RECIPES
MAX_TOKENS = 2 ** 31 - 1   # T: the row offsets and counts' prefix sums are int32
_OP = "grouped_glu_mlp"


def check_recipe(recipe) -> None:
    """None (x.dtype compute) or one of the quantized recipes."""
    if recipe is None:
        return
    if not isinstance(recipe, str):
        raise TypeError(f"{_OP}: recipe must be None or a str, got {type(recipe).__name__}")
    if recipe not in QUANTIZED_RECIPES:
        raise ValueError(f"{_OP}: recipe must be None or one of {QUANTIZED_RECIPES}, got {recipe!r}")


def check_recipe_shapes(recipe, hidden: int, ffn: int, hidden_name: str = "x.shape[1]",
                        ffn_name: str = "fc2_weight.shape[2]") -> None:
    """H and F are multiples of the recipe's scaling block (they are the GEMMs' K dimensions);
    the message names them as ``hidden_name`` and ``ffn_name`` (the caller's arguments)."""
    if recipe is None:
        return
    block = BLOCK[recipe]
    if hidden % block or ffn % block:
        raise ValueError(f"{_OP}: recipe {recipe!r} needs the hidden size H ({hidden_name}) and the FFN width F "
                         f"({ffn_name}) to be multiples of {block}, its scaling block along K; "
                         f"got H = {hidden}, F = {ffn}")


def check_activation(activation) -> None:
    if not isinstance(activation, str):
        raise TypeError(f"{_OP}: activation must be a str, one of {ACTIVATIONS}, got {type(activation).__name__}")
    if activation not in ACTIVATIONS:
        raise ValueError(f"{_OP}: activation must be one of {ACTIVATIONS}, got {activation!r}")


def check_glu_interleave(glu_interleave, ffn: int, ffn_name: str = "fc2_weight.shape[2]") -> None:
    """None (halves) or a positive int s dividing the FFN width F (named ``ffn_name``)."""
    if glu_interleave is None:
        return
    # bool is an int subclass; glu_interleave=True is a mistake, not 1.
    if isinstance(glu_interleave, bool) or not isinstance(glu_interleave, int):
        raise TypeError(f"{_OP}: glu_interleave must be None or an int, got {type(glu_interleave).__name__}")
    if glu_interleave < 1:
        raise ValueError(f"{_OP}: glu_interleave must be a positive int, got {glu_interleave}")
    if ffn % glu_interleave:
        raise ValueError(f"{_OP}: glu_interleave={glu_interleave} must divide the FFN width "
                         f"F = {ffn_name} = {ffn} (use glu_interleave=None for halves)")


def _check_tensor(name: str, t, dtypes, dtype_names: str) -> None:
    check_tensor(_OP, name, t)
    if t.dtype not in dtypes:
        raise TypeError(f"{_OP}: {name} must be {dtype_names}, got {t.dtype}")


def _check_same(name: str, t: torch.Tensor, x: torch.Tensor, dtype: bool = True) -> None:
    if dtype and t.dtype != x.dtype:
        raise TypeError(f"{_OP}: {name} is {t.dtype} but x is {x.dtype}; it must have x's dtype")
    if t.device != x.device:
        raise ValueError(f"{_OP}: {name} is on {t.device} but x is on {x.device}")


def _check_shape(name: str, t: torch.Tensor, expected: tuple, meaning: str) -> None:
    if tuple(t.shape) != expected:
        raise ValueError(f"{_OP}: {name} must have shape {meaning} = {expected}, got {tuple(t.shape)}")


def validate(x, tokens_per_expert, probs, fc1_weight, fc2_weight, *, activation, glu_interleave,
             fc1_bias, fc2_bias, recipe) -> None:
    """Raise TypeError (wrong kind or dtype) or ValueError (wrong value, shape or device),
    naming the offending argument. Returns None when the arguments are consistent.

    Expected: x (T, H) float32/bfloat16/float16; tokens_per_expert (E,) int32/int64;
    probs (T,) float32 or x's dtype; fc1_weight (E, 2F, H); fc2_weight (E, H, F);
    fc1_bias None or (E, 2F); fc2_bias None or (E, H) (weights and biases in x's dtype, every
    tensor on x's device); activation "swiglu" or "geglu"; glu_interleave None or a positive
    int dividing F; recipe None or a quantized recipe whose block divides H and F.
    ``sum(tokens_per_expert) == T`` is not checked here (module
    docstring).
    """
    check_recipe(recipe)
    check_activation(activation)

    # x first: it fixes T, H, the dtype and the device; fc1_weight then fixes E and F.
    _check_tensor("x", x, FLOAT_DTYPES, "float32, bfloat16 or float16")
    if x.dim() != 2:
        raise ValueError(f"{_OP}: x must be 2-D (T, H), got shape {tuple(x.shape)}")
    n_tokens, hidden = x.shape
    if hidden < 1:
        raise ValueError(f"{_OP}: x must have H = x.shape[1] >= 1, got shape {tuple(x.shape)}")
    if n_tokens > MAX_TOKENS:
        # the kernels' row offsets and the counts' prefix sums are int32
        raise ValueError(f"{_OP}: x has T = {n_tokens} rows; at most {MAX_TOKENS} (2**31 - 1) are supported")

    _check_tensor("fc1_weight", fc1_weight, FLOAT_DTYPES, "float32, bfloat16 or float16")
    _check_same("fc1_weight", fc1_weight, x)
    if fc1_weight.dim() != 3:
        raise ValueError(f"{_OP}: fc1_weight must be 3-D (E, 2F, H), got shape {tuple(fc1_weight.shape)}")
    n_experts, two_ffn, w1_hidden = fc1_weight.shape
    if n_experts < 1:
        raise ValueError(f"{_OP}: fc1_weight must hold E >= 1 experts, got shape {tuple(fc1_weight.shape)}")
    if two_ffn < 2 or two_ffn % 2:
        raise ValueError(f"{_OP}: fc1_weight.shape[1] must be 2F with F >= 1 (gate and up columns), "
                         f"got shape {tuple(fc1_weight.shape)}")
    if w1_hidden != hidden:
        raise ValueError(f"{_OP}: fc1_weight must have shape (E, 2F, H) with H = x.shape[1] = {hidden}, "
                         f"got shape {tuple(fc1_weight.shape)}")
    ffn = two_ffn // 2

    _check_tensor("fc2_weight", fc2_weight, FLOAT_DTYPES, "float32, bfloat16 or float16")
    _check_same("fc2_weight", fc2_weight, x)
    _check_shape("fc2_weight", fc2_weight, (n_experts, hidden, ffn), "(E, H, F)")

    _check_tensor("tokens_per_expert", tokens_per_expert, COUNT_DTYPES, "int32 or int64")
    _check_same("tokens_per_expert", tokens_per_expert, x, dtype=False)
    _check_shape("tokens_per_expert", tokens_per_expert, (n_experts,), "(E,) with E = fc1_weight.shape[0]")

    _check_tensor("probs", probs, FLOAT_DTYPES, "float32, bfloat16 or float16")
    if probs.dtype not in (torch.float32, x.dtype):
        raise TypeError(f"{_OP}: probs must be float32 or x's dtype ({x.dtype}), got {probs.dtype}")
    _check_same("probs", probs, x, dtype=False)
    _check_shape("probs", probs, (n_tokens,), "(T,) with T = x.shape[0]")

    for name, bias, expected, meaning in (("fc1_bias", fc1_bias, (n_experts, two_ffn), "(E, 2F)"),
                                          ("fc2_bias", fc2_bias, (n_experts, hidden), "(E, H)")):
        if bias is None:
            continue
        _check_tensor(name, bias, FLOAT_DTYPES, "None or a float32, bfloat16 or float16 tensor")
        _check_same(name, bias, x)
        _check_shape(name, bias, expected, meaning)

    check_glu_interleave(glu_interleave, ffn)
    check_recipe_shapes(recipe, hidden, ffn)
