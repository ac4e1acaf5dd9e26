"""``DyT`` module and ``convert_layernorm_to_dyt``."""

from __future__ import annotations

import logging
import math
import numbers
import operator
import warnings
from typing import Callable, Union

import torch
from torch import nn

from ..ops.dyt import dyt
from ..ops.dyt.api import ACCEPTED_DTYPES
from ..utils import FxProxy, check_bool, check_dtype_arg

logger = logging.getLogger("tilefuse.nn")

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
    call by the policy level in force (``tilefuse.level``), not at construction. float64
    parameters or inputs (``.double()``, ``torch.autograd.gradcheck``) run the float64
    reference at every level.

    DyT has no ``eps``: code that reads ``norm.eps`` to run LayerNorm math of its own (torch's
    ``nn.TransformerEncoderLayer`` inference fast path) gets an AttributeError saying so;
    ``convert_layernorm_to_dyt`` switches that fast path off on the layers it converts.

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
        # _parameters directly: self.alpha etc. would each miss the instance dict and go through
        # __getattr__ (the eps message below) on every call. A parameter under
        # torch.nn.utils.parametrize is a property instead, computed on access.
        p = self._parameters
        try:
            alpha, weight, bias = p["alpha"], p["weight"], p["bias"]
        except KeyError:
            alpha, weight, bias = self.alpha, self.weight, self.bias
        # nn.TransformerEncoder's nested-tensor path: each piece by itself (getattr: a
        # non-tensor x gets dyt's TypeError naming it, not an AttributeError); a torch.fx
        # proxy (symbolic tracing) has no nested layout to branch on: dyt makes it one node
        if type(x) is not FxProxy and getattr(x, "is_nested", False):
            if (self.channels_last and x.layout == torch.jagged and x.lengths() is None and x.dim() >= 3
                    and x.values().shape[1:] == x.shape[2:]):
                # ragged along dim 1 (B, j, ..., C), packed without holes: one call on the values,
                # rebuilt on x's offsets, so the result keeps x's ragged size (x + norm(x) works).
                # With holes (lengths) the values hold elements outside every piece, whatever they
                # are (NaN padding would make the parameters' gradients NaN): piece by piece.
                return torch.nested.nested_tensor_from_jagged(dyt(x.values(), alpha, weight, bias), offsets=x.offsets())
            if self.channels_last:
                pieces = [dyt(t, alpha, weight, bias) for t in x.unbind()]
            else:   # a piece is (C, *spatial), without the batch dim: run it as a batch of one
                pieces = [dyt(t.unsqueeze(0), alpha, weight, bias, channels_last=False).squeeze(0)
                          for t in x.unbind()]
            return torch.nested.as_nested_tensor(pieces, layout=x.layout)
        return dyt(x, alpha, weight, bias, channels_last=self.channels_last)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict,
                              missing_keys, unexpected_keys, error_msgs):
        for liger, ours in _LIGER_NAMES.items():
            # renamed only where this module has the parameter: a Liger "beta" given to a
            # DyT(bias=False) stays "beta", so torch's error names the key the caller passed
            has_ours = self._parameters.get(ours) is not None
            if prefix + liger in state_dict and prefix + ours not in state_dict and has_ours:
                state_dict[prefix + ours] = state_dict.pop(prefix + liger)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict,
                                      missing_keys, unexpected_keys, error_msgs)

    def __getattr__(self, name: str):
        # Not a property: an AttributeError raised by a property falls back to
        # nn.Module.__getattr__, which would replace this message with its bare one.
        if name == "eps":
            raise AttributeError(
                "DyT has no eps: it is not a LayerNorm. Code that reads norm.eps runs LayerNorm math of its "
                "own (torch's TransformerEncoderLayer / TransformerEncoder inference fast path); convert such "
                "layers with tilefuse.nn.convert_layernorm_to_dyt, which switches that fast path off on them")
        return super().__getattr__(name)

    def extra_repr(self) -> str:
        return (f"{self.num_features}, alpha_init={self.alpha_init}, bias={self.bias is not None}, "
                f"channels_last={self.channels_last}")


def _check_alpha_init(where: str, alpha_init) -> None:
    # bool is an int subclass (alpha_init=True is a mistake, not 1.0); strings and tensors are
    # not numbers here (float("0.5") would accept the first, float(t) syncs on the second).
    if isinstance(alpha_init, bool) or not isinstance(alpha_init, numbers.Real):
        raise TypeError(f"{where}: alpha_init must be a real number, got {type(alpha_init).__name__}")
    try:
        finite = math.isfinite(alpha_init)
    except OverflowError:   # an int past float's range (10**400)
        finite = False
    if not finite:
        raise ValueError(f"{where}: alpha_init must be finite, got {alpha_init!r}")


def _check_alpha_fits(where: str, alpha_init, dtype) -> None:
    """A finite alpha_init that the parameters' dtype (``None``: torch's default) rounds to inf
    (1e5 in float16): refused, as the inf alpha would make the outputs NaN."""
    dtype = torch.get_default_dtype() if dtype is None else dtype
    # on the CPU whatever the default device (meta under deferred init: no value; CUDA: a sync)
    if not math.isfinite(torch.tensor(float(alpha_init), dtype=torch.float64, device="cpu").to(dtype).item()):
        raise ValueError(f"{where}: alpha_init must be finite in the parameters' dtype {dtype}, got {alpha_init!r}")


def _check_args(num_features, alpha_init, bias, channels_last, dtype) -> None:
    """DyT's constructor arguments: TypeError (wrong kind) / ValueError (wrong value) naming
    the argument."""
    # bool is an int subclass: DyT(True) is a mistake, not DyT(1).
    if isinstance(num_features, bool) or not isinstance(num_features, int):
        raise TypeError(f"DyT: num_features must be an int, got {type(num_features).__name__}")
    if num_features < 1:
        raise ValueError(f"DyT: num_features must be >= 1, got {num_features}")
    _check_alpha_init("DyT", alpha_init)
    check_bool("DyT", "bias", bias)
    check_bool("DyT", "channels_last", channels_last)
    check_dtype_arg("DyT", dtype, ACCEPTED_DTYPES)
    _check_alpha_fits("DyT", alpha_init, dtype)


AlphaInit = Union[float, Callable[[str], float]]

# The kinds of norm the converter recognises (_norm_kind): LayerNorm2d becomes a channels-first
# DyT, RMSNorm-style a DyT without bias (rmsnorm=True only).
_LAYERNORM, _LAYERNORM_2D, _RMSNORM = "LayerNorm", "LayerNorm2d", "RMSNorm-style"


def _norm_kind(module: nn.Module) -> str | None:
    """The kind of norm ``module`` is (one of the three above), None when not one we recognise.

    LayerNorm: ``nn.LayerNorm`` (channels-last), and modules with ``data_format ==
    "channels_last"`` and a ``normalized_shape`` (the ConvNeXt reference LayerNorm's default
    form). LayerNorm2d: subclasses of ``nn.LayerNorm`` named ``...2d``, modules named
    ``LayerNorm2d`` (timm, detectron2 style: normalise dim 1 of NCHW), and modules with
    ``data_format == "channels_first"`` and a ``normalized_shape`` (the ConvNeXt reference
    LayerNorm). RMSNorm-style: ``nn.RMSNorm`` and modules whose class name ends with
    ``RMSNorm`` (Hugging Face's ``LlamaRMSNorm``, ``Qwen3MoeRMSNorm``, ...). Whether a
    recognised norm can be converted is ``_unconvertible``'s question.
    """
    data_format = getattr(module, "data_format", None)
    if data_format in ("channels_first", "channels_last") and hasattr(module, "normalized_shape"):
        return _LAYERNORM_2D if data_format == "channels_first" else _LAYERNORM
    if isinstance(module, nn.LayerNorm):
        return _LAYERNORM_2D if type(module).__name__.lower().endswith("2d") else _LAYERNORM
    if type(module).__name__ == "LayerNorm2d":
        return _LAYERNORM_2D
    if isinstance(module, getattr(nn, "RMSNorm", ())) or type(module).__name__.endswith("RMSNorm"):
        return _RMSNORM
    return None


def _unconvertible(module: nn.Module, kind: str) -> str | None:
    """Why a recognised norm is left as it is (the converter reports it), or None: it holds
    submodules (a norm with more computation: timm's ``LayerNormAct2d``, a gated RMSNorm),
    it is an ``nn.LayerNorm`` subclass with a forward of its own other than the ``...2d``
    channels-first one or the ConvNeXt form's (``data_format``), or it is an RMSNorm-style
    module without a weight or normalized_shape (its width is unknown). A DyT in its place
    would drop that computation silently."""
    if any(child is not None for child in module._modules.values()):
        return "holds submodules (more computation than a norm)"
    if (isinstance(module, nn.LayerNorm) and kind == _LAYERNORM
            and type(module).forward is not nn.LayerNorm.forward
            and getattr(module, "data_format", None) != "channels_last"):
        # (the ConvNeXt form, Hugging Face's ConvNextLayerNorm included, overrides forward to
        # take either data_format: its channels_last branch is LayerNorm's, as its
        # channels_first one is LayerNorm2d's)
        return "overrides LayerNorm.forward"
    if (kind == _RMSNORM and getattr(module, "normalized_shape", None) is None
            and not isinstance(getattr(module, "weight", None), torch.Tensor)):
        return "has neither normalized_shape nor a weight (width unknown)"
    return None


def _norm_width(module: nn.Module, name: str) -> int:
    """C, from ``normalized_shape`` (torch's norms) or the weight's shape (Hugging Face's
    RMSNorms, which keep no normalized_shape)."""
    shape = getattr(module, "normalized_shape", None)
    if shape is None:
        weight = getattr(module, "weight", None)
        if not isinstance(weight, torch.Tensor):
            raise ValueError(f"convert_layernorm_to_dyt: {name or 'module'} ({type(module).__name__}) has neither "
                             "normalized_shape nor a weight: its width is unknown")
        shape = tuple(weight.shape)
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    if len(shape) != 1:
        raise ValueError(f"convert_layernorm_to_dyt: {name or 'module'} normalizes over {shape}; "
                         "DyT has one parameter per channel of a single dimension")
    return operator.index(shape[0])   # nn.LayerNorm keeps a numpy integer width as given; DyT takes an int


def _make_dyt(module: nn.Module, kind: str, alpha_init: AlphaInit, name: str, ancestors: tuple) -> DyT:
    """The norm's DyT, on the device and in the dtype of the norm's weight, or where it has
    none (``elementwise_affine=False``) of the nearest floating tensor around it: of its parent
    (``_floating_tensor``: the parent's own, then its submodules', the norm's siblings), else
    of the ancestors above in turn (``ancestors``, nearest first), else torch's defaults."""
    width = _norm_width(module, name)
    if callable(alpha_init):
        alpha_init = alpha_init(name)
        _check_alpha_init(f"convert_layernorm_to_dyt: alpha_init({name!r})", alpha_init)
    ref = getattr(module, "weight", None)
    if not isinstance(ref, torch.Tensor):
        # looked for only here, for a norm without a weight: a subtree's walk is not free
        ref = next((t for t in map(_floating_tensor, ancestors) if t is not None), None)
    factory = {} if ref is None else {"device": ref.device, "dtype": ref.dtype}
    if ref is not None and ref.dtype not in ACCEPTED_DTYPES:
        raise TypeError(f"convert_layernorm_to_dyt: {name or 'module'} holds {ref.dtype} parameters; DyT takes "
                        "float32, bfloat16, float16 or float64 (convert the model's dtype first)")
    _check_alpha_fits(f"convert_layernorm_to_dyt: alpha_init for {name or 'the module'!r}", alpha_init,
                      factory.get("dtype"))
    has_bias = kind != _RMSNORM and getattr(module, "bias", None) is not None
    new = DyT(width, alpha_init=alpha_init, bias=has_bias, channels_last=kind != _LAYERNORM_2D, **factory)
    return new.train(module.training)   # the replaced module's train / eval state


def convert_layernorm_to_dyt(module: nn.Module, *, alpha_init: AlphaInit = 0.5, rmsnorm: bool = False) -> nn.Module:
    """Replace every LayerNorm in ``module`` (in place) with a freshly initialised ``DyT``.

    Args:
        module: the model (or a single norm).
        alpha_init: DyT's initial ``alpha``: a number, or a function of the norm's qualified
            name (``"layers.0.input_layernorm"``; ``""`` for ``module`` itself) returning one,
            for recipes with one value per kind of norm.
        rmsnorm: also replace RMSNorm-style modules (``nn.RMSNorm``, classes named
            ``...RMSNorm`` such as Hugging Face's ``LlamaRMSNorm``) with ``DyT(C, bias=False)``.
            That is the DyT paper's LLaMA recipe (Zhu et al., "Transformers without
            Normalization", 2025): DyT without bias, alpha_init per norm, e.g. 7B: attention
            0.8, FFN 0.2, final 0.2 (70B: 0.2 / 0.05 / 0.05). Every RMSNorm-style module is
            replaced, per-head ones (q_norm / k_norm) included. Off by default: an RMSNorm
            model is converted only when asked.

    Channels-last ``nn.LayerNorm`` (and ``data_format="channels_last"`` norms) becomes
    ``DyT(C)``; recognised channels-first variants (``LayerNorm2d``,
    ``data_format="channels_first"``) become ``DyT(C, channels_last=False)``. DyT gets a bias
    when the LayerNorm had one, and the norm's device and dtype (a norm without a weight: those
    of a floating parameter or buffer of its parent, the parent's own or else one of its
    submodules' such as a sibling Linear's, else likewise of each ancestor above in turn, else
    torch's defaults). The norm's own weights are not copied (DyT starts from its own
    initialisation). Returns ``module`` (or the new DyT when ``module`` itself is a norm).

    Left as they are, and named in a ``UserWarning``: recognised norms with more computation
    than the norm (child modules, such as timm's ``LayerNormAct2d`` or a gated RMSNorm; an
    ``nn.LayerNorm`` subclass with a forward of its own), and RMSNorm-style modules without a
    weight (their width is unknown). Nothing is replaced unless every replacement can be
    made: a norm DyT cannot stand for (normalising over several dimensions, non-float
    parameters, an ``alpha_init`` function's bad value) raises before the model is changed.

    Reports: the number of modules converted is logged (logger ``tilefuse.nn``, INFO); when
    none was, a ``UserWarning`` says so, and names the RMSNorm-style modules it left when
    ``rmsnorm`` is False.

    A LayerNorm registered in several places (one module shared by several parents, or used
    twice in one ``nn.Sequential``) becomes one DyT registered in all of them, so its
    parameters stay shared as the LayerNorm's were. A shared submodule is converted once.

    torch's Transformer layers: ``nn.TransformerEncoderLayer`` and ``nn.TransformerEncoder``
    have an inference fast path (eval mode, or no_grad) that runs torch's native LayerNorm
    math on ``norm.weight`` / ``norm.eps`` instead of calling the norm modules. On every
    ``nn.TransformerEncoderLayer`` whose ``norm1`` or ``norm2`` is a DyT after conversion the
    converter sets ``activation_relu_or_gelu = 0`` (a flag read only by that fast path's
    checks, before the norms; the layer's activation still comes from ``layer.activation``),
    and on every ``nn.TransformerEncoder`` holding such a layer ``use_nested_tensor = False``
    (its nested-tensor path). The converted layers then always run their Python path, which
    calls DyT: the same result in train and eval, with and without no_grad.

    Example:
        >>> block = nn.TransformerEncoderLayer(64, 4, batch_first=True)
        >>> block = convert_layernorm_to_dyt(block, alpha_init=0.5)
        >>> y = block.eval()(torch.randn(2, 10, 64))    # DyT's result, no fast path
    """
    if not isinstance(module, nn.Module):
        raise TypeError(f"convert_layernorm_to_dyt: module must be a torch.nn.Module, got {type(module).__name__}")
    if not callable(alpha_init):
        _check_alpha_init("convert_layernorm_to_dyt", alpha_init)
    check_bool("convert_layernorm_to_dyt", "rmsnorm", rmsnorm)
    replaced, left, skipped, visited, assignments = {}, {}, {}, {}, []
    new_root = _plan(module, alpha_init, rmsnorm, "", (), replaced, visited, left, skipped, assignments)
    # Every DyT is made (and every check passed): only now is the model changed.
    for parent, child_name, new in assignments:
        setattr(parent, child_name, new)
    for visited_module in visited.values():
        _keep_off_native_fast_path(visited_module)
    _report(module, replaced, left, skipped)
    return new_root


def _report(module: nn.Module, replaced: dict, left: dict, skipped: dict) -> None:
    if skipped:
        warnings.warn("convert_layernorm_to_dyt: left " + "; ".join(
            f"{name or 'the module'} ({type(m).__name__}): {why}" for name, (m, why) in sorted(skipped.items()))
            + ": a DyT in its place would drop its other computation or has no width", UserWarning, stacklevel=3)
    kinds: dict[str, int] = {}
    for norm, _ in replaced.values():
        kind = _norm_kind(norm)
        kinds[kind] = kinds.get(kind, 0) + 1
    left_names = sorted({type(m).__name__ for m in left.values()})
    if replaced:
        logger.info("convert_layernorm_to_dyt: converted %d module(s) to DyT: %s%s", len(replaced),
                    ", ".join(f"{n} {k}" for k, n in kinds.items()),
                    f"; left {len(left)} RMSNorm-style module(s) (rmsnorm=False)" if left else "")
        return
    message = f"convert_layernorm_to_dyt: converted no module: {type(module).__name__} holds no LayerNorm"
    if left:
        message += (f" but {len(left)} RMSNorm-style module(s) ({', '.join(left_names)}); pass rmsnorm=True to "
                    "replace them (the DyT paper's LLaMA recipe: DyT without bias, alpha_init per norm)")
    warnings.warn(message, UserWarning, stacklevel=3)


def _holds_dyt(layer: nn.Module) -> bool:
    return isinstance(getattr(layer, "norm1", None), DyT) or isinstance(getattr(layer, "norm2", None), DyT)


def _keep_off_native_fast_path(module: nn.Module) -> None:
    """Keep torch's Transformer inference fast path (native LayerNorm math) off a module whose
    norms are DyTs (convert_layernorm_to_dyt's docstring)."""
    if isinstance(module, nn.TransformerEncoderLayer) and _holds_dyt(module):
        module.activation_relu_or_gelu = 0
    elif isinstance(module, nn.TransformerEncoder) and any(_holds_dyt(layer) for layer in module.layers):
        module.use_nested_tensor = False


def _floating_tensor(module: nn.Module) -> torch.Tensor | None:
    """A floating parameter or buffer of ``module``: one it holds itself (parameters, then
    buffers), else one of its submodules' (parameters, then buffers), or None. A block whose
    tensors all sit in submodules (an adaLN block: a Linear beside a weightless LayerNorm,
    moved with ``.cuda()``) lives where they do."""
    for tensors in ((*module._parameters.values(), *module._buffers.values()), module.parameters(),
                    module.buffers()):
        for t in tensors:
            if isinstance(t, torch.Tensor) and t.is_floating_point():
                return t
    return None


def _plan(module: nn.Module, alpha_init, rmsnorm: bool, name: str, ancestors: tuple, replaced: dict, visited: dict,
          left: dict, skipped: dict, assignments: list) -> nn.Module:
    """What ``module`` becomes, changing nothing: its DyT when it is a norm to convert (one per
    norm object, from ``replaced``), else ``module``, with the replacements of its children
    appended to ``assignments`` as (parent, name, new) (each module walked once:
    ``visited``; RMSNorm-style modules not converted go to ``left``, recognised norms left by
    ``_unconvertible`` to ``skipped``). ``ancestors``: ``module``'s, nearest first, where a
    norm without a weight finds its device and dtype (``_make_dyt``). The children are walked
    through ``_modules``, not ``named_children()``, which yields a module registered under
    several names only once and so would leave its other registrations unconverted."""
    # Keyed by id (a module class may define __eq__/__hash__); the values keep the modules
    # alive, so an id is never reused during the walk.
    kind = _norm_kind(module)
    if kind == _RMSNORM and not rmsnorm:
        left[id(module)] = module
        return module
    if kind is not None:
        why = _unconvertible(module, kind)
        if why is not None:
            skipped[name] = (module, why)
            return module
        if id(module) not in replaced:
            replaced[id(module)] = (module, _make_dyt(module, kind, alpha_init, name, ancestors))
        return replaced[id(module)][1]
    if id(module) in visited:
        return module
    visited[id(module)] = module
    ancestors = (module, *ancestors)
    for child_name, child in list(module._modules.items()):
        if child is None:
            continue
        new = _plan(child, alpha_init, rmsnorm, f"{name}.{child_name}" if name else child_name, ancestors, replaced,
                    visited, left, skipped, assignments)
        if new is not child:
            assignments.append((module, child_name, new))
    return module
