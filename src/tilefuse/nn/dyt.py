"""``DyT`` module and ``convert_layernorm_to_dyt``."""

from __future__ import annotations

import math
import numbers

import torch
from torch import nn

from ..ops.dyt import dyt
from ..ops.dyt.api import FLOAT_DTYPES

# Liger-Kernel's LigerDyT names its parameters gamma/beta; the official DyT code uses
# weight/bias. State dicts with either naming load.
_LIGER_NAMES = {"gamma": "weight", "beta": "bias"}


class DyT(nn.Module):
    """Dynamic Tanh, a drop-in replacement for LayerNorm: ``y = weight * tanh(alpha * x) + bias``.

    Args:
        num_features: C, the normalized dimension (last dim, or dim 1 when channels-first).
        alpha_init: initial value of the scalar ``alpha`` (0.5 in the paper; the LLaMA recipe
            uses smaller values for wide models).
        bias: whether to learn ``bias`` (the LLaMA variant has none).
        channels_last: ``True`` for (..., C) inputs; ``False`` for (N, C, *spatial).

    Parameters: ``alpha`` (1,), ``weight`` (C,) initialised to ones, ``bias`` (C,) to zeros.
    The execution path (reference or Triton kernels, and which config) is decided on every
    call by the policy level in force (``tilefuse.level``), not at construction.

    Example:
        >>> m = DyT(768, alpha_init=0.5)
        >>> y = m(torch.randn(4, 128, 768))
    """

    def __init__(self, num_features: int, *, alpha_init: float = 0.5, bias: bool = True,
                 channels_last: bool = True, device=None, dtype=None):
        super().__init__()
        _check_args(num_features, alpha_init, bias, channels_last, dtype)
        factory = {"device": device, "dtype": dtype}
        self.num_features = num_features
        self.channels_last = channels_last
        self.alpha_init = float(alpha_init)
        self.alpha = nn.Parameter(torch.empty(1, **factory))
        self.weight = nn.Parameter(torch.empty(num_features, **factory))
        if bias:
            self.bias = nn.Parameter(torch.empty(num_features, **factory))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        with torch.no_grad():
            self.alpha.fill_(self.alpha_init)
            self.weight.fill_(1.0)
            if self.bias is not None:
                self.bias.zero_()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return dyt(x, self.alpha, self.weight, self.bias, channels_last=self.channels_last)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict,
                              missing_keys, unexpected_keys, error_msgs):
        for liger, ours in _LIGER_NAMES.items():
            if prefix + liger in state_dict and prefix + ours not in state_dict:
                state_dict[prefix + ours] = state_dict.pop(prefix + liger)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict,
                                      missing_keys, unexpected_keys, error_msgs)

    def extra_repr(self) -> str:
        return (f"{self.num_features}, alpha_init={self.alpha_init}, bias={self.bias is not None}, "
                f"channels_last={self.channels_last}")


def _check_alpha_init(where: str, alpha_init) -> None:
    # bool is an int subclass (alpha_init=True is a mistake, not 1.0); strings and tensors are
    # not numbers here (float("0.5") would accept the first, float(t) syncs on the second).
    if isinstance(alpha_init, bool) or not isinstance(alpha_init, numbers.Real):
        raise TypeError(f"{where}: alpha_init must be a real number, got {type(alpha_init).__name__}")
    if not math.isfinite(alpha_init):
        raise ValueError(f"{where}: alpha_init must be finite, got {alpha_init!r}")


def _check_args(num_features, alpha_init, bias, channels_last, dtype) -> None:
    """DyT's constructor arguments: TypeError (wrong kind) / ValueError (wrong value) naming
    the argument."""
    # bool is an int subclass: DyT(True) is a mistake, not DyT(1).
    if isinstance(num_features, bool) or not isinstance(num_features, int):
        raise TypeError(f"DyT: num_features must be an int, got {type(num_features).__name__}")
    if num_features < 1:
        raise ValueError(f"DyT: num_features must be >= 1, got {num_features}")
    _check_alpha_init("DyT", alpha_init)
    for name, value in (("bias", bias), ("channels_last", channels_last)):
        if not isinstance(value, bool):
            raise TypeError(f"DyT: {name} must be a bool, got {type(value).__name__}")
    if dtype is not None and (not isinstance(dtype, torch.dtype) or dtype not in FLOAT_DTYPES):
        raise TypeError(f"DyT: dtype must be None, torch.float32, torch.bfloat16 or torch.float16 "
                        f"(what tilefuse.dyt takes), got {dtype!r}")


def _channels_first_layernorm(module: nn.Module) -> bool | None:
    """True/False for LayerNorm variants we recognise (channels-first or not), None otherwise.

    Recognised: ``nn.LayerNorm`` (channels-last); subclasses named ``LayerNorm2d`` (timm,
    detectron2 style: normalises dim 1 of NCHW); modules with ``data_format ==
    "channels_first"`` and a ``normalized_shape`` (the ConvNeXt reference LayerNorm).
    """
    if getattr(module, "data_format", None) == "channels_first" and hasattr(module, "normalized_shape"):
        return True
    if isinstance(module, nn.LayerNorm):
        return type(module).__name__.lower().endswith("2d")
    if type(module).__name__ == "LayerNorm2d":
        return True
    return None


def _make_dyt(module: nn.Module, channels_first: bool, alpha_init: float, name: str) -> DyT:
    shape = module.normalized_shape
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    if len(shape) != 1:
        raise ValueError(f"convert_layernorm_to_dyt: {name or 'module'} normalizes over {shape}; "
                         "DyT has one parameter per channel of a single dimension")
    ref = getattr(module, "weight", None)
    factory = {} if ref is None else {"device": ref.device, "dtype": ref.dtype}
    if ref is not None and ref.dtype not in FLOAT_DTYPES:
        raise TypeError(f"convert_layernorm_to_dyt: {name or 'module'} holds {ref.dtype} parameters; DyT takes "
                        "float32, bfloat16 or float16 (convert the model's dtype first)")
    has_bias = getattr(module, "bias", None) is not None
    return DyT(shape[0], alpha_init=alpha_init, bias=has_bias,
               channels_last=not channels_first, **factory)


def convert_layernorm_to_dyt(module: nn.Module, *, alpha_init: float = 0.5) -> nn.Module:
    """Replace every LayerNorm in ``module`` (in place) with a freshly initialised ``DyT``.

    Channels-last ``nn.LayerNorm`` becomes ``DyT(C)``; recognised channels-first variants
    (``LayerNorm2d``, ``data_format="channels_first"``) become ``DyT(C, channels_last=False)``.
    DyT gets a bias when the LayerNorm had one, and the LayerNorm's device and dtype. Returns
    ``module`` (or the new DyT when ``module`` itself is a LayerNorm).

    A LayerNorm registered in several places (one module shared by several parents, or used
    twice in one ``nn.Sequential``) becomes one DyT registered in all of them, so its
    parameters stay shared as the LayerNorm's were. A shared submodule is converted once.

    Example:
        >>> block = nn.TransformerEncoderLayer(64, 4, batch_first=True)
        >>> block = convert_layernorm_to_dyt(block, alpha_init=0.5)
    """
    if not isinstance(module, nn.Module):
        raise TypeError(f"convert_layernorm_to_dyt: module must be a torch.nn.Module, got {type(module).__name__}")
    _check_alpha_init("convert_layernorm_to_dyt", alpha_init)
    return _convert(module, alpha_init, "", {}, {})


def _convert(module: nn.Module, alpha_init: float, name: str, replaced: dict, visited: dict) -> nn.Module:
    """``module`` converted: its DyT when it is a LayerNorm (one per LayerNorm object, from
    ``replaced``), else ``module`` with its children converted (once per module object:
    ``visited``). The children are walked through ``_modules``, not ``named_children()``,
    which yields a module registered under several names only once and so would leave its
    other registrations unconverted."""
    # Keyed by id (a module class may define __eq__/__hash__); the values keep the modules
    # alive, so an id is never reused during the walk.
    kind = _channels_first_layernorm(module)
    if kind is not None:
        if id(module) not in replaced:
            replaced[id(module)] = (module, _make_dyt(module, kind, alpha_init, name))
        return replaced[id(module)][1]
    if id(module) in visited:
        return module
    visited[id(module)] = module
    for child_name, child in list(module._modules.items()):
        if child is None:
            continue
        new = _convert(child, alpha_init, f"{name}.{child_name}" if name else child_name, replaced, visited)
        if new is not child:
            setattr(module, child_name, new)
    return module
