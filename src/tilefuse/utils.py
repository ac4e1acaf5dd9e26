"""Small helpers (kept free of a Triton import so the package imports without it)."""

import contextlib
import math
import threading

import torch


def type_name(v) -> str:
    """``v``'s type for an error message: the bare name of a builtin type, else qualified by its
    module (numpy 2's bool scalar is ``numpy.bool``, not a "bool" a bool check refused)."""
    kind = type(v)
    return kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"


def check_bool(where: str, name: str, v) -> None:
    """TypeError naming ``name`` (after ``where``) unless ``v`` is a bool (not numpy's, not an int)."""
    if not isinstance(v, bool):
        raise TypeError(f"{where}: {name} must be a bool, got {type_name(v)}")


def check_tensor(where: str, name: str, t, what: str = "a torch.Tensor") -> None:
    """TypeError naming ``name`` (after ``where``, where given) unless ``t`` is a dense tensor:
    a torch.Tensor of strided layout, not nested. The kernels read memory through data_ptr()
    and strides; sparse and nested tensors have neither (their layout checks are then the
    users' first hint, rather than a RuntimeError from inside torch)."""
    prefix = f"{where}: " if where else ""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{prefix}{name} must be {what}, got {type(t).__name__}")
    if t.layout is not torch.strided or t.is_nested:
        kind = "a nested tensor" if t.is_nested else f"layout {t.layout}"
        raise TypeError(f"{prefix}{name} must be a dense (strided) tensor, got {kind}")


def unreadable(t) -> bool:
    """Whether ``t`` is a tensor whose memory does not hold its values as kernels read them
    (``readable``): a negative-bit view, or a ZeroTensor."""
    return isinstance(t, torch.Tensor) and (t.is_neg() or t._is_zerotensor())


def readable(t):
    """``t`` as kernels, which read memory through data_ptr(), can read it:
    - a negative-bit view (PyTorch's lazy negation: ``z.conj().imag`` holds the values'
      negatives in memory and flips them on read) resolved;
    - a ZeroTensor (zeros that own no memory, ``torch._efficientzerotensor``: autograd hands
      backwards such gradients, and they can be passed as inputs) made real zeros, still
      differentiable where it requires grad.
    torch.library custom ops get such tensors made readable by the dispatcher; eager entry
    points and backwards call this. Anything else (a plain tensor, None, a non-tensor for the
    argument checks) as it is."""
    if not isinstance(t, torch.Tensor):
        return t
    if t._is_zerotensor():
        zeros = torch.zeros(t.shape, dtype=t.dtype, device=t.device)
        return zeros + t if t.requires_grad else zeros
    return t.resolve_neg() if t.is_neg() else t



def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def next_power_of_2(n: int) -> int:
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def capture_cuda_graph(fn, pool=None):
    """(graph, outputs): ``fn`` run once on a side stream (allocator pools, lazy init: capture
    needs that warm-up there), then captured in a CUDA graph (in memory pool ``pool`` if
    given). ``outputs`` are what the captured call returned: its tensors are rewritten by
    every ``graph.replay()``."""
    import torch
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, pool=pool):
        outputs = fn()
    return graph, outputs



# normwise_rel_error's float64 work goes in chunks of this many elements: a tuning sweep's
# check compares outputs of many GB (so2's saved z at lmax 6 is 8 surfaces of 1-2 GB), whose
# whole float64 copies would take several times the memory its inputs were sized for.
NORMWISE_CHUNK = 1 << 22


def normwise_rel_error(got, want) -> float:
    """||got - want|| / ||want|| (Frobenius norms, in float64 on the tensors' device, on the host
    where they differ; tensors of one shape in chunks of NORMWISE_CHUNK elements, so the float64
    temporaries stay small); max |got| (in float64) where want is all zeros; 0 for empty tensors."""
    got, want = got.detach(), want.detach()
    if got.device != want.device:
        got, want = got.cpu(), want.cpu()
    if got.shape == want.shape:
        g, w = got.reshape(-1), want.reshape(-1)
        diff2 = ref2 = 0.0
        for start in range(0, g.numel(), NORMWISE_CHUNK):
            gc, wc = g[start:start + NORMWISE_CHUNK].double(), w[start:start + NORMWISE_CHUNK].double()
            diff2 += float(torch.linalg.vector_norm(gc - wc)) ** 2
            ref2 += float(torch.linalg.vector_norm(wc)) ** 2
        diff, denom = math.sqrt(diff2), math.sqrt(ref2)
        if not denom and g.numel():
            # on the float64 chunks too: in got's dtype an integer minimum's |got| overflows,
            # and a bool tensor has no abs
            return float(torch.stack([g[start:start + NORMWISE_CHUNK].double().abs().max()
                                      for start in range(0, g.numel(), NORMWISE_CHUNK)]).max())
    else:   # broadcast against each other, whole
        got, want = got.double(), want.double()
        diff, denom = float((got - want).norm()), float(want.norm())
    if denom:
        return diff / denom
    return float(got.abs().max()) if got.numel() else 0.0


# autograd's id of the graph task the calling thread is running (-1 outside one): how a call on
# autograd's CUDA device thread, which opened no block, is told from another thread's.
_graph_task_id = getattr(torch._C, "_current_graph_task_id", lambda: -1)


def blocks_here(blocks) -> list:
    """Which of the open blocks ``blocks`` (pairs of the opening thread's ident and the block's
    record, in opening order) a call on this thread goes into: every block this thread opened
    (nested blocks each see it); on a thread that opened none, every open block while it is
    autograd's own worker (a thread Python did not start: threading's _DummyThread) running a
    graph task (the CUDA device thread running a backward for the thread that opened one: it
    cannot tell whose), else none, so another Python thread's calls, its own backwards
    included (on the CPU a backward runs on the thread that called it), never land in a block.
    The rule of tuning.table's collecting() and launches.counting()."""
    if not blocks:
        return []
    me = threading.get_ident()
    own = [record for owner, record in blocks if owner == me]
    if own or _graph_task_id() == -1 or not isinstance(threading.current_thread(), threading._DummyThread):
        return own
    return [record for _, record in blocks]


class ThreadBlocks:
    """The open blocks of one kind (tuning.collecting, launches.counting): ``open`` holds
    (the opening thread's ident, the block's record) pairs in opening order, a tuple replaced
    whole, so a hot path can test it without a lock; ``add`` and ``remove`` run under the
    owner's lock, ``here`` is blocks_here's choice among them."""

    __slots__ = ("open",)

    def __init__(self):
        self.open: tuple = ()

    def add(self, record) -> tuple:
        token = (threading.get_ident(), record)
        self.open = (*self.open, token)
        return token

    def remove(self, token) -> None:
        # by identity: another block's token may compare equal (same thread, equal records)
        i = next(i for i, t in enumerate(self.open) if t is token)
        self.open = self.open[:i] + self.open[i + 1:]

    def here(self) -> list:
        return blocks_here(self.open)

    def __bool__(self) -> bool:
        return bool(self.open)


class SharedOverride:
    """A process-wide setting held while any of its blocks is open, in any thread: ``apply()``
    runs when the first block opens and returns what it replaced, ``restore(saved)`` when the
    last one closes. Blocks may nest and overlap across threads. (Blocks that each saved and
    restored on their own would, overlapping, put back what the other had set: the first to
    close would end the setting under the other, and the last leave it on for good.)"""

    def __init__(self, apply, restore):
        self._apply, self._restore = apply, restore
        self._lock = threading.Lock()
        self._depth = 0
        self._saved = None

    @contextlib.contextmanager
    def __call__(self):
        with self._lock:
            if self._depth == 0:
                self._saved = self._apply()
            self._depth += 1
        try:
            yield
        finally:
            with self._lock:
                self._depth -= 1
                if self._depth == 0:
                    self._restore(self._saved)
                    self._saved = None


def _ieee_apply():
    saved = (_matmul_precision(), _reduced_reductions(), _backend_matmul_precisions())
    _set_matmul_precision(("ieee", "ieee") if isinstance(saved[0], tuple) else "highest")
    _set_reduced_reductions((False, False))
    return saved


def _ieee_restore(saved):
    _set_matmul_precision(saved[0])
    _set_reduced_reductions(saved[1])
    _set_backend_matmul_precisions(saved[2])   # after the legacy setter, which writes them


_ieee_override = SharedOverride(_ieee_apply, _ieee_restore)


def _matmul_precision():
    """The float32 matmul precision setting in the API the caller set it through: the legacy
    ``torch.get_float32_matmul_precision()``, or, where the caller set the per-backend
    ``fp32_precision`` (torch then refuses the legacy read: a mix of the two APIs), the cuda and
    mkldnn matmul settings. Writing the other API's would make that mix, which torch refuses
    at the next TF32 check (a cuBLAS matmul's included)."""
    import torch
    try:
        return torch.get_float32_matmul_precision()
    except RuntimeError:
        return (torch.backends.cuda.matmul.fp32_precision, torch.backends.mkldnn.matmul.fp32_precision)


def _set_matmul_precision(saved) -> None:
    import torch
    if isinstance(saved, tuple):
        torch.backends.cuda.matmul.fp32_precision, torch.backends.mkldnn.matmul.fp32_precision = saved
    else:
        torch.set_float32_matmul_precision(saved)


def _backend_matmul_precisions() -> list:
    """(backend, its own matmul ``fp32_precision``) for cuBLAS's and oneDNN's matmul settings
    (``torch.backends.cuda.matmul`` / ``torch.backends.mkldnn.matmul``; torch 2.9 and later,
    none before). The legacy ``torch.set_float32_matmul_precision`` writes these: "highest"
    writes "ieee" where they were "none" (follow the backend's setting, and that
    ``torch.backends.fp32_precision``), so a legacy save and restore alone would leave them
    "ieee", and a later ``torch.backends.fp32_precision = "tf32"`` would reach neither backend.
    torch reads a "none" setting as the one it follows, so one that reads as its backend's
    is taken for "none": it then behaves as it did (an explicit setting equal to the one it
    follows would follow later changes of that one, the one case not told apart)."""
    import torch
    get = getattr(torch._C, "_get_fp32_precision_getter", None)
    if get is None or getattr(torch._C, "_set_fp32_precision_setter", None) is None:
        return []
    saved = []
    for backend in ("cuda", "mkldnn"):
        own = get(backend, "matmul")
        saved.append((backend, "none" if own == get(backend, "all") else own))
    return saved


def _set_backend_matmul_precisions(saved) -> None:
    import torch
    for backend, precision in saved:
        torch._C._set_fp32_precision_setter(backend, "matmul", precision)


def _reduced_reductions():
    """cuBLAS's 16-bit GEMMs may reduce split-K partial sums in 16 bits (torch's default):
    (bf16, fp16) settings."""
    import torch
    m = torch.backends.cuda.matmul
    return m.allow_bf16_reduced_precision_reduction, m.allow_fp16_reduced_precision_reduction


def _set_reduced_reductions(saved) -> None:
    import torch
    m = torch.backends.cuda.matmul
    m.allow_bf16_reduced_precision_reduction, m.allow_fp16_reduced_precision_reduction = saved


@contextlib.contextmanager
def ieee_matmul(device_type: str | None = None):
    """float32 matmuls in IEEE float32 inside the block, whatever the caller's matmul precision
    (``torch.set_float32_matmul_precision`` or the per-backend ``fp32_precision``: the
    process-wide setting is IEEE while any such block is open, in any thread, and the
    caller's comes back when the last one closes: blocks may nest and overlap across threads;
    every per-backend string as it was, "none" included, whichever API the caller used).
    16-bit matmuls keep their float32 sums whole the same way (cuBLAS's reduced-precision
    split-K reductions, ``allow_bf16/fp16_reduced_precision_reduction``, off).
    With ``device_type`` ("cuda", "cpu"), autocast is off for it inside the block too: an
    autocast region around the call would run the block's matmuls in 16 bits. A device type
    autocast does not take ("meta") has no autocast region to turn off."""
    import torch
    with _ieee_override():
        if device_type is None or not torch.amp.is_autocast_available(device_type):
            yield
        else:
            with torch.autocast(device_type, enabled=False):
                yield


def gemms_in_dtype(t: torch.Tensor, ieee: bool = False):
    """The context the plain-PyTorch renderings run their GEMMs in, for operands on t's
    device: autocast off where the caller's region turned it on there (it would run a float32
    ``@`` in bfloat16 and return bfloat16: grouped_glu_mlp's y out of x's dtype on its
    per-expert loop only, as ``torch._grouped_mm`` has no autocast rule on the CPU), else
    nothing: outside an autocast region it costs nothing (grouped's unfused composition is
    also its level-0 path and the plain composition `tilefuse check` times). The float32
    matmul precision (TF32) stays the process's setting, except with ``ieee`` (exact paths:
    grouped's recipe rendering, whose float32 GEMMs stand for exact products of quantized
    operands; so2's reference where it stands for the kernels): ieee_matmul, autocast off too;
    under torch.compile autocast off only (Dynamo cannot enter ieee_matmul's lock). Meta
    tensors hold no values (and autocast takes no meta device): nothing."""
    device = t.device.type
    if device == "meta":
        return contextlib.nullcontext()
    if ieee and not torch.compiler.is_compiling():
        return ieee_matmul(device)
    if torch.is_autocast_enabled(device):
        return torch.autocast(device, enabled=False)
    return contextlib.nullcontext()


def check_dtype_arg(where: str, dtype, accepted) -> None:
    """A module constructor's ``dtype`` argument: None or one of ``accepted`` (the dtypes its
    op takes); TypeError naming it otherwise."""
    import torch
    if dtype is not None and (not isinstance(dtype, torch.dtype) or dtype not in accepted):
        names = ", ".join(f"torch.{str(d).split('.')[-1]}" for d in accepted)
        raise TypeError(f"{where}: dtype must be None or one of {names} (what the op takes), got {dtype!r}")


FxProxy = torch.fx.Proxy


def fx_node(fn, *args, **kwargs):
    """The node calling ``fn(*args, **kwargs)`` in the graph torch.fx.symbolic_trace is
    building, for an op whose first tensor argument is a ``torch.fx.Proxy``: the op is one leaf
    of the graph, and its checks, routing and kernels run when the GraphModule runs (tracing
    through it would branch on proxies). The ops test ``type(x) is FxProxy`` first (one
    comparison on their hot paths)."""
    return args[0].tracer.create_proxy("call_function", fn, args, kwargs)


def fx_proxy_in(*args) -> FxProxy | None:
    """The first ``torch.fx.Proxy`` among ``args``, or None."""
    return next((a for a in args if type(a) is FxProxy), None)


def fx_module_node(module: torch.nn.Module, where: str, proxy: FxProxy, *args):
    """The node calling ``module(*args)`` in the graph torch.fx.symbolic_trace is building
    (``proxy`` one of the args): for a module whose forward cannot be traced (host-side split
    sizes, collectives, shape unpacking), so that it is one leaf of the graph, as a module
    Tracer.is_leaf_module names is, and runs whole when the GraphModule runs. As the trace's
    root it has no enclosing module to be a leaf of: TypeError naming it."""
    tracer = proxy.tracer
    path = tracer.path_of_module(module)
    if not path:
        raise TypeError(f"{where}: torch.fx.symbolic_trace cannot trace this module as the root (its forward "
                        f"depends on the routing's values); trace a model holding it, where it is one leaf node")
    return tracer.create_proxy("call_module", path, args, {})
