"""The execution policy: one level for the whole library.

| level | meaning |
|---|---|
| 0 | reference PyTorch only (debugging, bisecting) |
| 1 | Triton kernels with heuristic configs; fused variants that need tuning stay off |
| 2 | level 1 + tuned choices from the tuning table (default); a key never swept uses the safe default |
| 3 | level 2 + reduced-precision variants that passed their accuracy validation |

The level comes from ``tilefuse.set_level(n)`` / ``with tilefuse.level(n):`` when set, else
from the ``TILEFUSE_LEVEL`` environment variable, else 2. It is read when an op is called: a
module consults it on every call. Under ``torch.compile``, dyt and so2_mixing_stack decide
inside their custom ops when the graph runs; grouped_glu_mlp's route (fused or unfused) is
chosen while tracing and baked into the graph (its docstring says so).

Kernels run on CUDA tensors, and on CPU tensors only under Triton's interpreter
(``TRITON_INTERPRET=1``, or another value Triton reads as true, set before Triton is imported;
``interpreter_enabled``). Anywhere else the reference runs, and
so it does on fake tensors and under an active FakeTensorMode (is_eager_fake).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import operator
import os
import sys
import threading

import torch
from torch.autograd import forward_ad
from torch._subclasses.fake_tensor import is_fake
from torch.utils._python_dispatch import is_traceable_wrapper_subclass

LEVELS = (0, 1, 2, 3)
DEFAULT_LEVEL = 2

# The open ``level()`` blocks of this context, oldest first, as (block, level) pairs: a context
# variable, so a block is seen by its own thread and, under asyncio, by its own task (each task
# runs in a copy of the context; a per-thread stack cannot tell interleaved tasks' blocks
# apart). Leaving a block removes its own pair wherever it stands, so blocks may close in any
# order: a block in a generator still suspended when an enclosing block closes, closed after
# it, leaves neither level behind (a ContextVar.reset token, which restores the value its set
# replaced, would bring the closed enclosing block's level back for good).
_block_level: contextvars.ContextVar = contextvars.ContextVar("tilefuse_level", default=())

# The innermost block's level, per thread, for torch.compile's tracer: Dynamo cannot trace
# ContextVar.get, and guards what it reads here, so a compiled function retraces when a block's
# level changes.
# (Traced inside asyncio tasks whose blocks interleave, it may show another task's block.) With
# ``depth`` the number of blocks open on the thread: where none is, it shows none, whatever a
# task's copy of the context held (a task created inside a block that closed before the task's
# own block did would leave that block's level behind for every later compile).
_traced = threading.local()


def _innermost() -> int | None:
    """The innermost open block's level in this context, or None."""
    blocks = _block_level.get()
    return blocks[-1][1] if blocks else None


def _check_level(n) -> int:
    """n as a plain int (any integer type: numpy's too; not bool), or ValueError."""
    if not isinstance(n, bool):
        with contextlib.suppress(TypeError):
            n = operator.index(n)
    if isinstance(n, bool) or not isinstance(n, int) or n not in LEVELS:
        raise ValueError(f"level must be one of {LEVELS}, got {n!r}")
    return n


# get_level() runs on every op call (dyt keys its cached call plans on it), and
# os.environ.get costs more than the rest of it (the str key is encoded and the value decoded
# on each call: 0.7 of 1.3 us, measured on a CPU host). CPython's os.environ holds the encoded
# environment in ``_data``, which os.environ[...] = / del / monkeypatch.setenv update; reading
# that dict and parsing a value only when it changed observes every such change for a dict probe.
_ENVIRON_TYPE = type(os.environ)
try:
    _ENV_KEY = os.environ.encodekey("TILEFUSE_LEVEL")
    os.environ._data.get(_ENV_KEY)
except AttributeError:   # not CPython's os._Environ: the plain lookup below
    _ENV_KEY = None
_env_parsed: tuple = (None, DEFAULT_LEVEL)   # (raw value, its level)


def _env_level() -> int:
    global _env_parsed
    env = os.environ
    if _ENV_KEY is not None and type(env) is _ENVIRON_TYPE:
        raw = env._data.get(_ENV_KEY)
    else:
        raw = env.get("TILEFUSE_LEVEL")
    if raw is None:
        return DEFAULT_LEVEL
    parsed_raw, parsed = _env_parsed
    if raw == parsed_raw:
        return parsed
    text = raw.decode(errors="surrogateescape") if isinstance(raw, bytes) else raw
    if text.strip() == "":
        level = DEFAULT_LEVEL
    else:
        try:
            level = _check_level(int(text))
        except ValueError:
            raise ValueError(f"TILEFUSE_LEVEL must be one of {', '.join(map(str, LEVELS))} "
                             f"(unset: {DEFAULT_LEVEL}), got {text!r}") from None
    _env_parsed = (raw, level)
    return level


_global_level: int | None = None


def get_level() -> int:
    """The level in force: the innermost ``level()`` context, else ``set_level``, else the env."""
    block = getattr(_traced, "level", None) if torch.compiler.is_compiling() else _innermost()
    if block is not None:
        return block
    if _global_level is not None:
        return _global_level
    return _env_level()


def set_level(n: int | None) -> None:
    """Set the process-wide level (``None`` returns to ``TILEFUSE_LEVEL`` / the default)."""
    global _global_level
    _global_level = None if n is None else _check_level(n)


@contextlib.contextmanager
def level(n: int):
    """Run a block at level ``n`` (nests; seen by this thread, or under asyncio by this task:
    a context variable).

    A block inside a generator is open in its caller's context while the generator is
    suspended (generators share it), and may close after the blocks around it: leaving a block
    removes that block alone. Close such a generator on the thread that started it: closed on
    another, its block raises RuntimeError and stays open where it was opened.

    torch.compile'd code reads the level of a block opened on its own thread (a per-thread
    mirror: Dynamo guards on it, not on the context variable): a context copied to another
    thread (``asyncio.to_thread``, ``contextvars.Context.run``) carries the block to eager
    calls there but not to compiled ones, which run at ``set_level`` / ``TILEFUSE_LEVEL``'s
    level. Open the block inside the function that thread runs.

    On CUDA, autograd runs ``backward()`` on its own device thread, which does not see a
    ``level`` block (it sees ``set_level`` / ``TILEFUSE_LEVEL``): eager calls of
    so2_mixing_stack and grouped_glu_mlp take the backward's route from what their forward
    decided (a block around the forward chooses both), while dyt, and so2_mixing_stack's
    torch.compile'd calls, decide the backward again at the level in force on that thread. Use
    ``set_level`` to choose those backwards' level on CUDA.

    Activation checkpointing (``torch.utils.checkpoint``) recomputes the forward inside the
    backward, so at the backward's level: where that is not the forward's and one of them is 0,
    the recompute saves other tensors and torch raises a CheckpointError. Give the recompute
    the forward's level: ``checkpoint(fn, *args, use_reentrant=False, context_fn=lambda:
    (contextlib.nullcontext(), tilefuse.level(tilefuse.get_level())))``."""
    n = _check_level(n)
    block = object()
    _block_level.set(_block_level.get() + ((block, n),))
    _traced.depth = getattr(_traced, "depth", 0) + 1
    _traced.level = n
    try:
        yield n
    finally:
        # the mirror follows this context's blocks (not a saved value: blocks of interleaved
        # asyncio tasks would restore each other's), or none where no block is open here; the
        # count drops first, so a block closed in another context (a suspended generator's,
        # closed on another thread), which raises, does not leave a block counted for good
        # (nor below 0 on a thread that opened none)
        _traced.depth = depth = max(getattr(_traced, "depth", 1) - 1, 0)
        try:
            blocks = _block_level.get()
            if not any(b is block for b, _ in blocks):
                raise RuntimeError("a tilefuse.level block was closed in another context than the one it was "
                                   "opened in (a generator holding it, closed on another thread): its level "
                                   "stays in force where it was opened; close it on its own thread")
            _block_level.set(tuple(pair for pair in blocks if pair[0] is not block))
        finally:
            _traced.level = _innermost() if depth else None


# How Triton parses TRITON_INTERPRET (triton.knobs.runtime.interpret, libtriton's getenv_bool,
# in Triton 3.6 and 3.8): these values in any case, nothing stripped (" 1" is off); unset is off.
_TRITON_TRUE = frozenset(("1", "true", "on", "yes", "y"))


def interpreter_enabled() -> bool:
    """Whether Triton runs kernels in its interpreter, as Triton itself decides it: its own
    setting once Triton is imported (``triton.knobs.runtime.interpret``, which reads
    TRITON_INTERPRET again on every access, or a value set on the knob), else the variable
    parsed as Triton will parse it (this module is imported before Triton and never imports
    it). Read on every call, as the knob is; Triton consults it when it decorates a kernel, so
    it must be set before tilefuse's kernel modules are imported."""
    knobs = sys.modules.get("triton.knobs")
    runtime = getattr(knobs, "runtime", None)
    if runtime is not None:
        try:
            return bool(runtime.interpret)
        except AttributeError:   # a Triton whose knobs have no interpret: the parse below
            pass
    return os.environ.get("TRITON_INTERPRET", "").lower() in _TRITON_TRUE


@functools.lru_cache(maxsize=None)
def triton_available() -> bool:
    try:
        import triton  # noqa: F401
        import triton.language  # noqa: F401
    except Exception:  # an absent or broken Triton means: reference only
        return False
    return True


def kernels_enabled(device: torch.device, level: int | None = None) -> bool:
    """Whether Triton kernels may run for tensors on ``device`` at ``level`` (default: the
    current level; a caller deciding several things from one reading passes it)."""
    if (get_level() if level is None else level) == 0 or not triton_available():
        return False
    if device.type == "cuda":
        return True
    return device.type == "cpu" and interpreter_enabled()


def differentiating() -> bool:
    """Whether torch.func transforms (grad, vmap, jacrev, ...) or a forward-mode AD level are
    active: the public ops then run their differentiable reference, eagerly and under
    torch.compile (Dynamo reads both while tracing and guards on them), since neither the
    kernels' autograd.Functions nor the custom ops have forward-mode or functorch rules."""
    return torch._C._are_functorch_transforms_active() or forward_ad._current_level >= 0


def kernels_run_on(t: torch.Tensor, level: int | None = None) -> bool:
    """``kernels_enabled`` for ``t``'s device, and ``t`` has memory of its own to launch on and
    its outputs would have some (not ``no_kernel_memory``): a fake tensor, or any tensor under
    an active FakeTensorMode, takes the ops' plain-PyTorch paths, whose torch ops give the
    outputs' metadata, and so does a wrapper subclass (DTensor, ...; wraps_tensors); and no
    eager trace is recording (``eager_tracing``)."""
    return kernels_enabled(t.device, level) and not no_kernel_memory(t) and not eager_tracing()


# The active proxy-tracing mode (make_fx's ProxyTorchDispatchMode), or None: one C call, as
# active_fake_mode below.
_active_proxy_mode = functools.partial(torch._C._get_dispatch_mode, torch._C._TorchDispatchModeKey.PROXY)


def eager_tracing() -> bool:
    """Whether, outside torch.compile, a trace records the torch ops this call runs: make_fx
    (its real tracing mode; the fake one is also fake_mode_active) or torch.jit.trace. A
    kernel's launch is not a torch op, so the trace would hold its output's allocation and not
    its writes (the graph would return uninitialised memory): the ops take their plain-PyTorch
    paths there, which the trace records. Inside torch.compile the ops' custom ops are the
    graph's nodes instead (Dynamo folds is_compiling; AOT autograd's own make_fx never runs
    the ops' Python entry points)."""
    return not torch.compiler.is_compiling() and recording_trace()


def recording_trace() -> bool:
    """``eager_tracing`` where the caller knows it is not compiling (dyt's eager hot path: two C
    calls)."""
    return _active_proxy_mode() is not None or torch._C._is_tracing()


# The active FakeTensorMode, or None: FakeTensorMode installs itself in this infra-mode slot
# (torch._subclasses.fake_tensor, FakeTensorMode._mode_key: there since torch 2.1, so in every
# torch tilefuse takes), read by one C call (a partial, so no Python frame: about 0.08 us on a
# CPU host).
active_fake_mode = functools.partial(torch._C._get_dispatch_mode, torch._C._TorchDispatchModeKey.FAKE)


def fake_mode_active() -> bool:
    """Whether a FakeTensorMode is in force (``allow_non_fake_inputs=True`` lets real tensors
    in): every tensor allocated now is fake, so kernels would have no memory to write their
    outputs to even where their inputs are real. Outside torch.compile only (is_eager_fake
    asks is_compiling first)."""
    return active_fake_mode() is not None


def is_eager_fake(t: torch.Tensor) -> bool:
    """Whether, outside torch.compile, ``t`` is a FakeTensor or a FakeTensorMode is in force
    (as memory estimators run a model's eager forward and backward; fake_mode_active): no
    memory to launch kernels on, or none for their outputs. A plain tensor or parameter is
    answered without is_fake's walk through wrapper subclasses (it runs on every eager call);
    a traced call's tensors are the compiler's own, and Dynamo refuses to trace is_fake (it
    folds is_compiling, so it never reaches the mode lookup either)."""
    if torch.compiler.is_compiling():
        return False
    if type(t) in _PLAIN_TENSORS:
        return active_fake_mode() is not None
    return is_fake(t) or active_fake_mode() is not None


def no_kernel_memory(t: torch.Tensor) -> bool:
    """Whether, outside torch.compile, kernels cannot launch on ``t``: is_eager_fake, or ``t``
    is a wrapper subclass (wraps_tensors), whose memory is that of the tensors it wraps. A
    plain tensor or parameter costs what is_eager_fake's costs and one type lookup."""
    return is_eager_fake(t) or (type(t) not in _PLAIN_TENSORS and wraps_tensors(t))


def wraps_tensors(*tensors) -> bool:
    """Whether, outside torch.compile, any of ``tensors`` (None skipped) is a wrapper tensor
    subclass (is_traceable_wrapper_subclass: DTensor, ...). Its storage is not its data (a
    kernel launched on it raises "invalid python storage"), and only its own torch ops know
    what its values mean (a DTensor's shards and placements), so the public ops run their
    plain-PyTorch reference on it, as at level 0, where its torch ops give a result of its class
    with ordinary autograd (dyt, so2_mixing_stack), or refuse it by name where that reference
    cannot run on it either (refuse_wrapped: grouped_glu_mlp, the quantizers). A FakeTensor
    wraps nothing (is_eager_fake asks about it; a DTensor of fake tensors is both). Plain
    tensors and parameters cost a type lookup each (every eager call of so2_mixing_stack asks;
    dyt and grouped_glu_mlp ask when they build a plan); is_compiling is asked only for another
    class, before Dynamo would trace is_traceable_wrapper_subclass."""
    for t in tensors:
        if type(t) not in _PLAIN_TENSORS and t is not None:
            if torch.compiler.is_compiling():
                return False
            if is_traceable_wrapper_subclass(t):
                return True
    return False


def refuse_wrapped(op: str, why: str, names, tensors) -> None:
    """TypeError naming the first of ``tensors`` (``names`` theirs; None skipped) that is a
    wrapper subclass (wraps_tensors), for an op whose plain-PyTorch reference cannot run on one
    either (``why`` says what fails there); nothing where none is. Plain tensors and parameters
    cost a type lookup each, as in wraps_tensors (eager calls of grouped_glu_mlp's unplanned
    path and of the quantizers ask)."""
    for name, t in zip(names, tensors):
        if type(t) not in _PLAIN_TENSORS and t is not None and wraps_tensors(t):
            raise TypeError(f"{op}: {name} is a {type(t).__name__}, a tensor subclass wrapping other tensors, "
                            f"which {op} does not take ({why}); pass plain tensors (a DTensor's to_local() "
                            f"or full_tensor())")


_PLAIN_TENSORS = (torch.Tensor, torch.nn.Parameter)
