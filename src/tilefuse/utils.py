"""Small helpers (kept free of a Triton import so the package imports without it)."""

import contextlib
import math
import threading

import torch


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
    temporaries stay small); max |got| where want is all zeros; 0 for empty tensors."""
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
    else:   # broadcast against each other, whole
        got, want = got.double(), want.double()
        diff, denom = float((got - want).norm()), float(want.norm())
    if denom:
        return diff / denom
    return float(got.abs().max()) if got.numel() else 0.0


_ieee_lock = threading.Lock()
_ieee_depth = 0
_ieee_saved = None


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
    caller's comes back when the last one closes: blocks may nest and overlap across threads).
    16-bit matmuls keep their float32 sums whole the same way (cuBLAS's reduced-precision
    split-K reductions, ``allow_bf16/fp16_reduced_precision_reduction``, off).
    With ``device_type`` ("cuda", "cpu"), autocast is off for it inside the block too: an
    autocast region around the call would run the block's matmuls in 16 bits. A device type
    autocast does not take ("meta") has no autocast region to turn off."""
    import torch
    global _ieee_depth, _ieee_saved
    with _ieee_lock:
        if _ieee_depth == 0:
            _ieee_saved = (_matmul_precision(), _reduced_reductions())
            _set_matmul_precision(("ieee", "ieee") if isinstance(_ieee_saved[0], tuple) else "highest")
            _set_reduced_reductions((False, False))
        _ieee_depth += 1
    try:
        if device_type is None or not torch.amp.is_autocast_available(device_type):
            yield
        else:
            with torch.autocast(device_type, enabled=False):
                yield
    finally:
        with _ieee_lock:
            _ieee_depth -= 1
            if _ieee_depth == 0:
                _set_matmul_precision(_ieee_saved[0])
                _set_reduced_reductions(_ieee_saved[1])


def check_dtype_arg(where: str, dtype, accepted) -> None:
    """A module constructor's ``dtype`` argument: None or one of ``accepted`` (the dtypes its
    op takes); TypeError naming it otherwise."""
    import torch
    if dtype is not None and (not isinstance(dtype, torch.dtype) or dtype not in accepted):
        names = ", ".join(f"torch.{str(d).split('.')[-1]}" for d in accepted)
        raise TypeError(f"{where}: dtype must be None or one of {names} (what the op takes), got {dtype!r}")
