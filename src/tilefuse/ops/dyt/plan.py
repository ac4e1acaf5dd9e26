"""DyT call plans: what a call decides from its arguments' metadata, decided once per metadata.

A call's route, checks and launch parameters depend only on the arguments' types, shapes,
strides, dtypes and devices, on ``channels_last``, on the policy level, on the tuning table,
on the current CUDA device (on the CPU: whether Triton's interpreter is on) and on whether a
FakeTensorMode is active (policy.fake_mode_active: its allocations are fake). A ``Plan``
holds everything decided from those:

- the outcome of validate (it reads only metadata): building a plan runs it, so a cached
  plan is a passed check;
- the route: the float64 reference, the level-0 reference (api.dyt; also for wrapper
  subclasses such as DTensor, policy.wraps_tensors), the kernels, or the
  reference formulas where kernels cannot run (policy.kernels_enabled; op.forward_impl), have
  no memory to read or write (fake tensors, an active FakeTensorMode) or cannot address the
  matrix (an extent within a tile of 2**31: launch.addressable);
- the layout the kernels see (launch._layout) and whether x, dy or a parameter needs a
  contiguous copy to reach it; how outputs are allocated;
- the launches, built on first use: launch.ForwardLaunch, and a launch.BackwardLaunch per
  dy layout (config, grids, the kernels' compiled-kernel launchers, scratch).

Per call what remains is the key (a tuple of that metadata, about 1 us of attribute reads on
a CPU host), the allocations and the launches.

The cache is a dict of at most MAX_PLANS plans; when full the oldest plan goes first. The key
holds the level (policy.get_level) and the tuning table's generation (tuning.table.generation,
bumped by register, unregister, record, reload and by entering collecting()), so a plan is
only found under the level and table it was built for: after a table change every call builds
a new plan, and the old generation's plans age out; a level set back finds its plans again.
Nothing needs to clear the cache.
"""

from __future__ import annotations

import torch
from torch._subclasses.fake_tensor import maybe_get_fake_mode

from ... import launches, policy
from ...device import plan_cuda_device
from ...tuning import table
from ...utils import check_bool, check_tensor
from ..plan_cache import PlanCache
from . import launch, reference

FLOAT_DTYPES = (torch.float32, torch.bfloat16, torch.float16)   # what the kernels take
# float64 runs the reference in float64 (gradcheck, .double() models), never a kernel.
ACCEPTED_DTYPES = FLOAT_DTYPES + (torch.float64,)


def check_float(name: str, t) -> bool:
    """Whether t is float64; TypeError naming it unless it is a tensor of ACCEPTED_DTYPES."""
    check_tensor("dyt", name, t)
    if t.dtype not in ACCEPTED_DTYPES:
        raise TypeError(f"dyt: {name} must be float32, bfloat16, float16 or float64, got {t.dtype}")
    return t.dtype == torch.float64


def check_dy(dy, x) -> None:
    """TypeError/ValueError unless dy is a floating tensor of x's shape on x's device. Autograd
    hands DyTFunction such a gradient for the x it saved; the custom op
    ``tilefuse::dyt_backward`` can be called with anything, a saved-tensor hook can hand the
    backward another x (Plan.backward_if_current), and the kernels read x's element count from
    dy."""
    check_float("dy", dy)
    if dy.shape != x.shape:
        raise ValueError(f"dyt_backward: dy must have x's shape {tuple(x.shape)}, got {tuple(dy.shape)}")
    if dy.device != x.device:
        raise ValueError(f"dyt_backward: dy is on {dy.device} but x is on {x.device}")


def validate(x, alpha, weight, bias, channels_last: bool) -> bool:
    """Raise TypeError/ValueError naming the offending argument; returns whether any tensor
    is float64 (the float64 reference runs then)."""
    f64 = check_float("x", x) | check_float("alpha", alpha) | check_float("weight", weight)
    if bias is not None:
        f64 |= check_float("bias", bias)
    check_bool("dyt", "channels_last", channels_last)
    if alpha.numel() != 1 or alpha.dim() > max(x.dim(), 1):
        # more dimensions than x would broadcast y to more dimensions than x on the reference paths
        raise ValueError(f"dyt: alpha must have one element and no more dimensions than x ({x.dim()}), "
                         f"e.g. shape (1,) or (), got shape {tuple(alpha.shape)}")
    if channels_last:
        if x.dim() < 1:
            raise ValueError("dyt: x must have at least 1 dimension (..., C)")
        channels = x.shape[-1]
    else:
        if x.dim() < 2:
            raise ValueError(f"dyt: channels-first x must be (N, C, *spatial), got shape {tuple(x.shape)}")
        channels = x.shape[1]
    for name, p in (("weight", weight), ("bias", bias)):
        if p is None:
            continue
        if p.dim() != 1 or p.shape[0] != channels:
            where = "last" if channels_last else "channel (dim 1)"
            raise ValueError(f"dyt: {name} must have shape ({channels},) to match x's {where} "
                             f"dimension, got {tuple(p.shape)}")
    for name, p in (("alpha", alpha), ("weight", weight), ("bias", bias)):
        if p is not None and p.device != x.device:
            raise ValueError(f"dyt: {name} is on {p.device} but x is on {x.device}")
    return f64


def compute_dtype(f64: bool) -> torch.dtype:
    """The dtype the reference formulas compute in: float64 where a tensor is float64
    (validate's result), else float32."""
    return torch.float64 if f64 else torch.float32


MAX_PLANS = 256
MAX_DY_LAYOUTS = 8   # backward launches a plan keeps (dy strides and dtype usually match y's)

_plans = PlanCache(lambda: MAX_PLANS)
_CONTIGUOUS = torch.contiguous_format
_active_fake_mode = policy.active_fake_mode


def _aux(x):
    """What besides metadata and an active FakeTensorMode decides a plan: the current CUDA
    device (its tuning table, where Triton launches), or on the CPU whether the interpreter
    runs kernels (device.plan_cuda_device: a fake CUDA tensor where this process has no CUDA
    takes its own index)."""
    if x.is_cuda:
        return plan_cuda_device(x)
    if x.is_cpu:
        return "interpreter" if policy.interpreter_enabled() else "no interpreter"
    return None


def _key(x, alpha, weight, bias, channels_last, config, level, generation, aux, fake_mode):
    # Every tensor's layout: a sparse or mkldnn tensor never shares a dense tensor's plan but
    # makes its own first lookup, where validate names it (strides raise for sparse tensors,
    # not for mkldnn ones).
    if channels_last.__class__ is not bool:
        raise TypeError("channels_last")      # uncached: validate names it
    if bias is None:
        return (x.__class__, x.layout, x.shape, x.stride(), x.dtype, x.device,
                alpha.__class__, alpha.layout, alpha.shape, alpha.stride(), alpha.dtype, alpha.device,
                weight.__class__, weight.layout, weight.shape, weight.stride(), weight.dtype, weight.device,
                channels_last, level, generation, aux, fake_mode, config)
    return (x.__class__, x.layout, x.shape, x.stride(), x.dtype, x.device,
            alpha.__class__, alpha.layout, alpha.shape, alpha.stride(), alpha.dtype, alpha.device,
            weight.__class__, weight.layout, weight.shape, weight.stride(), weight.dtype, weight.device,
            bias.__class__, bias.layout, bias.shape, bias.stride(), bias.dtype, bias.device,
            channels_last, level, generation, aux, fake_mode, config)


def _saved_meta(x, alpha, weight, bias) -> tuple:
    """What of the forward's tensors a plan was built for and a saved-tensor hook can change:
    each one's shape, strides, dtype and device. Autograd gives dy the forward's y's shape and
    device, which are x's, so a backward whose x still matches needs no check of dy."""
    return (x.shape, x.stride(), x.dtype, x.device, alpha.shape, alpha.stride(), alpha.dtype, alpha.device,
            weight.shape, weight.stride(), weight.dtype, weight.device,
            None if bias is None else (bias.shape, bias.stride(), bias.dtype, bias.device))


def lookup(x, alpha, weight, bias, channels_last, config=None) -> "Plan":
    """The plan for these arguments (built, checked and cached on first sight). Raises what
    validate raises for bad arguments."""
    fake_mode = _active_fake_mode() is not None   # every allocation fake (policy.fake_mode_active)
    try:
        level, generation = policy.get_level(), table.generation()
        aux = _aux(x)
        key = _key(x, alpha, weight, bias, channels_last, config, level, generation, aux, fake_mode)
        plan = _plans.get(key)
    except Exception:   # noqa: BLE001  not describable by a key: the checks below name what is wrong
        key = plan = None
    if plan is not None and not _collectors.open:   # table.collecting_any, inlined (hot path)
        return plan
    f64 = validate(x, alpha, weight, bias, channels_last)
    if key is None:     # valid arguments the key cannot hold (or a bad TILEFUSE_LEVEL: raised here)
        level, generation, aux = policy.get_level(), table.generation(), _aux(x)
    plan = Plan(x, alpha, weight, bias, channels_last, config, f64, level, generation, aux, fake_mode)
    if key is not None:
        _plans.store(key, plan)
    return plan


# tuning.table's open collecting() blocks: while any is open a cached plan is not reused
# (table.collecting_any), so the calling thread's block records the call's lookups.
_collectors = table._collectors
cache_size = _plans.__len__   # plans held
clear = _plans.clear          # drop every plan (tests; nothing needs it for correctness)


class Plan:
    """The decisions for one key (module docstring); the forward and backward entry points
    that run them."""

    __slots__ = ("f64", "level", "generation", "aux", "fake_mode", "foreign", "channels_last", "kernels",
                 "wrapped", "fake_params", "compute_dtype", "empty",
                 "layout",
                 "has_bias", "config", "device", "x_itemsize", "x_copy", "w_copy", "b_copy", "saved",
                 "_fwd", "_bwd")

    def __init__(self, x, alpha, weight, bias, channels_last, config, f64, level, generation, aux, fake_mode):
        self.f64, self.level, self.generation, self.aux, self.fake_mode = f64, level, generation, aux, fake_mode
        # x on another CUDA device than the current one (aux): api.dyt makes x's current and
        # looks up the plan keyed by that (device.on_tensor_device's rule, decided once here)
        self.foreign = x.is_cuda and x.get_device() != aux
        self.channels_last = channels_last
        self.empty = x.numel() == 0
        self.layout = lay = launch._layout(x, channels_last)
        # extents within a tile of 2**31 take the reference formulas (launch.addressable)
        # float64 never reaches a kernel (the custom ops hand a plan float64 tensors; api.dyt
        # runs the reference itself): its reference formulas run in float64.
        # Fake tensors (FakeTensorMode outside torch.compile, as memory estimators run a model's
        # eager forward and backward) have no memory to launch on, x's or a parameter's, and
        # under an active FakeTensorMode (allow_non_fake_inputs=True lets real tensors in) the
        # outputs and scratch would be fake: the reference formulas' torch ops give the outputs'
        # metadata. The key holds each tensor's class and whether a FakeTensorMode is active,
        # so a plan built for either is never found for real tensors outside the mode, nor the
        # other way round.
        # A wrapper subclass among them (DTensor, ...: policy.wraps_tensors) owns no memory of its
        # own either, and its outputs must be of its class, which the outputs allocated here are
        # not: api.dyt runs the reference wholesale on it (wrapped), as at level 0.
        self.wrapped = policy.wraps_tensors(x, alpha, weight, bias)
        self.kernels = (not f64 and level != 0 and not fake_mode and not self.wrapped
                        and policy.kernels_run_on(x, level)
                        and not any(policy.no_kernel_memory(p) for p in (alpha, weight, bias) if p is not None)
                        and launch.addressable(lay))
        # FakeTensor parameters with a real x outside a FakeTensorMode (a module built under
        # the mode, called with a real x): the reference formulas' results are fake, and so
        # must be the outputs they are copied to (allocated from x they would be real, and the
        # copy would leave them unwritten)
        self.fake_params = not (self.kernels or policy.is_eager_fake(x)) and any(
            maybe_get_fake_mode(p) is not None for p in (alpha, weight, bias))
        self.compute_dtype = compute_dtype(f64)
        self.has_bias = bias is not None
        self.config = config
        self.device = x.device
        self.x_itemsize = x.element_size()
        # The kernels take addresses: x in channels_last memory format (the moved layout) is
        # read in place like its contiguous movedim(1, -1) view; other layouts need x contiguous.
        self.x_copy = not (lay.moved or x.is_contiguous())
        self.w_copy = not weight.is_contiguous()
        self.b_copy = bias is not None and not bias.is_contiguous()
        self.saved = _saved_meta(x, alpha, weight, bias)
        self._fwd = None
        self._bwd: dict = {}

    # --- allocation ------------------------------------------------------------------------

    def new_output(self, x):
        """launch.new_output(x, channels_last), without recomputing the layout."""
        return launch.alloc_output(x, self.layout.moved)

    def _reference_output(self, x, alpha, weight, bias):
        """new_output(x) for the reference formulas' y or dx: under the parameters' fake mode
        where they are fake and x is not (fake_params), as eager PyTorch's result is fake."""
        if not self.fake_params:
            return self.new_output(x)
        with next(m for m in map(maybe_get_fake_mode, (alpha, weight, bias)) if m is not None):
            return self.new_output(x)

    # --- forward ---------------------------------------------------------------------------

    def forward(self, x, alpha, weight, bias):
        """y by the kernel where kernels may run, else by the float32 reference formulas."""
        if self.kernels:
            return self.launch_forward(x, alpha, weight, bias)
        y = self._reference_output(x, alpha, weight, bias)
        if policy.is_eager_fake(x):
            # no values to compute: the kernels' output as metadata (a fake CUDA tensor's copy_
            # raises in a PyTorch built without CUDA, where memory estimators run them)
            return y
        y.copy_(reference.dyt_reference(x, alpha, weight, bias, channels_last=self.channels_last,
                                        compute_dtype=self.compute_dtype))
        return y

    def launch_forward(self, x, alpha, weight, bias, out=None):
        y = self.new_output(x) if out is None else launch._check_out(out, x, self.channels_last, "out")
        if self.empty:
            return y
        fwd = self._fwd
        if fwd is None:
            fwd = self._fwd = launch.ForwardLaunch(self.layout, self.x_itemsize, self.has_bias, self.device,
                                                     self.config, self.level)
        w = weight.contiguous() if self.w_copy else weight
        fwd.launch(x.contiguous() if self.x_copy else x, y, alpha, w,
                   w if bias is None else (bias.contiguous() if self.b_copy else bias))
        launches.record("dyt_fwd")
        return y

    # --- backward --------------------------------------------------------------------------

    def backward(self, dy, x, alpha, weight, bias):
        """(dx, dalpha, dweight, dbias or None) by the kernels or the reference formulas."""
        if self.kernels:
            return self.launch_backward(dy, x, alpha, weight, bias)
        dx_ref, dalpha, dweight, dbias = reference.dyt_backward_reference(
            dy, x, alpha, weight, bias, channels_last=self.channels_last, compute_dtype=self.compute_dtype)
        dx = self._reference_output(x, alpha, weight, bias)
        if not policy.is_eager_fake(x):   # (fake: no values, and no copy_ without CUDA: forward)
            dx.copy_(dx_ref)
        return dx, dalpha, dweight, dbias

    def backward_if_current(self, dy, x, alpha, weight, bias):
        """backward() when this plan still describes the call (the forward's plan, carried to
        the backward: the level, the table, the current device and an active FakeTensorMode
        can have changed, and so can the saved tensors, through saved-tensor hooks:
        ``torch.autograd.graph.save_on_cpu`` gives them back contiguous, a hook may give back
        anything), else that of a fresh lookup, after dy is checked against the x it gets
        (check_dy: autograd shaped dy after the forward's x, which the plan's launches would
        otherwise take for dy's extent)."""
        if (self.level == policy.get_level() and self.generation == table.generation() and self.aux == _aux(x)
                and self.saved == _saved_meta(x, alpha, weight, bias)
                and self.fake_mode is (_active_fake_mode() is not None)):
            return self.backward(dy, x, alpha, weight, bias)
        check_dy(dy, x)
        return lookup(x, alpha, weight, bias, self.channels_last).backward(dy, x, alpha, weight, bias)

    def launch_backward(self, dy, x, alpha, weight, bias, dx_out=None):
        dx = self.new_output(x) if dx_out is None else launch._check_out(dx_out, x, self.channels_last, "dx_out")
        dalpha = torch.empty_like(alpha, memory_format=_CONTIGUOUS)
        dweight = torch.empty_like(weight, memory_format=_CONTIGUOUS)
        dbias = torch.empty_like(bias, memory_format=_CONTIGUOUS) if bias is not None else None
        if self.empty:
            dalpha.zero_()
            dweight.zero_()
            if dbias is not None:
                dbias.zero_()
            return dx, dalpha, dweight, dbias
        dy_key = (dy.stride(), dy.dtype)
        entry = self._bwd.get(dy_key)
        if entry is None:
            entry = self._backward_launch(dy, dy_key)
        bwd, dy_copy = entry
        w = weight.contiguous() if self.w_copy else weight
        bwd(launch._as_matrix(dy, self.layout) if dy_copy else dy, x.contiguous() if self.x_copy else x,
            dx, alpha, w, dweight, dweight if dbias is None else dbias, dalpha)
        launches.record("dyt_bwd")
        return dx, dalpha, dweight, dbias

    def _backward_launch(self, dy, dy_key):
        # dy's layout is its own: it reaches the kernels' layout without a copy when it has the
        # strides that layout reads (contiguous, or its movedim(1, -1) view contiguous).
        # Layouts of the same dtype share one BackwardLaunch (its kernels are compiled for the
        # dtypes they read: a new dy dtype gets its own).
        dy_view = dy.movedim(1, -1) if self.layout.moved else dy
        shared = next((bwd for (_, dtype), (bwd, _) in list(self._bwd.items()) if dtype == dy_key[1]), None)
        if shared is None:
            shared = launch.BackwardLaunch(self.layout, self.x_itemsize, self.has_bias, self.device, self.config,
                                           self.level)
        entry = (shared, not dy_view.is_contiguous())
        if len(self._bwd) >= MAX_DY_LAYOUTS:
            self._bwd.clear()
        self._bwd[dy_key] = entry
        return entry
