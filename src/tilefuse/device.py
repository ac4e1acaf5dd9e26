"""Device facts the launchers need (cached)."""

from __future__ import annotations

import functools
import inspect

import torch

from .utils import readable, unreadable

# Under Triton's interpreter on the CPU a "device" has this many SMs: small, so persistent
# loops run several iterations per program at test sizes.
INTERPRETER_SMS = 2


# The CUDA queries a launch makes, as Triton's CUDA driver makes them (backends/driver.py,
# GPUDriver.__init__, triton 3.6 and 3.8: torch.cuda.current_device and
# torch._C._cuda_getCurrentRawStream), bound once. The launchers ask only once a CUDA tensor
# exists (CUDA is initialised), so the device query skips current_device's lazy-init check;
# a torch without the private entry points gets the public ones.
#: The current CUDA device's index.
current_cuda_device = getattr(torch._C, "_cuda_getDevice", None) or torch.cuda.current_device
#: The raw handle of a device's current stream (the stream Triton launches on), given its index.
current_cuda_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None) or \
    (lambda index: torch.cuda.current_stream(index).cuda_stream)
#: Whether the current CUDA stream is capturing a graph.
stream_is_capturing = getattr(torch._C, "_cuda_isCurrentStreamCapturing", None) or \
    torch.cuda.is_current_stream_capturing


def plan_cuda_device(t) -> int:
    """The current CUDA device for a call on CUDA tensor ``t`` (what its call plan is keyed
    by: that device's tuning table, where Triton launches), or ``t``'s own index where this
    process has no CUDA (a fake CUDA tensor, as memory estimators make them on a CPU-only
    build: no device to make current, no kernel to run). The availability check runs only when
    the device query fails, so a plan lookup pays nothing for it."""
    try:
        return current_cuda_device()
    except Exception:
        if torch.cuda.is_available():
            raise
        return t.get_device()


def other_cuda_device(t) -> int | None:
    """The index of ``t``'s CUDA device where ``t`` is a tensor on a CUDA device other than the
    current one, else None. tilefuse's kernels launch on the current device and its current
    stream (Triton's JIT, triton_common's launchers), torch's ops on their tensors' device, so
    the public entry points make a tensor's device current first (``on_tensor_device``). None
    too where this process has no CUDA: a fake CUDA tensor (FakeTensorMode's, as memory
    estimators make them on a CPU-only build) has no device to make current."""
    if isinstance(t, torch.Tensor) and t.is_cuda:
        index = t.get_device()
        if index != plan_cuda_device(t):   # its own index where there is no CUDA: None
            return index
    return None


def on_tensor_device(fn):
    """Decorator of a public entry point whose first argument is the tensor that places the
    call: the call runs with that tensor's CUDA device current (``torch.cuda.device``) where it
    is on another one (other_cuda_device), else as it is; every tensor argument with a set
    negative bit is resolved and every ZeroTensor made real zeros first (utils.readable: the
    kernels read memory). Traced calls are left alone: compiled code places its kernels
    itself, and the custom ops' dispatcher resolves such tensors. The first argument may come
    by keyword, under its name in ``fn``."""
    first = next(iter(inspect.signature(fn).parameters))

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if not torch.compiler.is_compiling():
            if any(map(unreadable, (*args, *kwargs.values()))):
                args = tuple(map(readable, args))
                kwargs = {k: readable(v) for k, v in kwargs.items()}
            index = other_cuda_device(args[0] if args else kwargs.get(first))
            if index is not None:
                with torch.cuda.device(index):
                    return fn(*args, **kwargs)
        return fn(*args, **kwargs)
    return wrapper


def custom_op_on_tensor_device(fn):
    """``on_tensor_device`` for the function of a ``torch.library.custom_op`` (what a compiled
    graph runs, or ``torch.ops.tilefuse.*`` called eagerly: the kernels would launch on the
    current device otherwise). The wrapper carries ``fn``'s signature with its annotations
    evaluated in ``fn``'s module, where custom_op reads the schema's types (it would evaluate
    the strings of ``from __future__ import annotations`` in this module)."""
    wrapper = on_tensor_device(fn)
    wrapper.__signature__ = inspect.signature(fn, eval_str=True)
    return wrapper


@functools.lru_cache(maxsize=None)
def _cuda_sms(index: int) -> int:
    return torch.cuda.get_device_properties(index).multi_processor_count


def num_sms(device: torch.device) -> int:
    if device.type == "cuda":
        return _cuda_sms(device.index if device.index is not None else torch.cuda.current_device())
    return INTERPRETER_SMS


@functools.lru_cache(maxsize=None)
def _cuda_major(index: int) -> int:
    return torch.cuda.get_device_properties(index).major


def capability_major(device: torch.device) -> int:
    """A CUDA device's compute-capability major version (9 for Hopper); cached per device."""
    return _cuda_major(device.index if device.index is not None else torch.cuda.current_device())


@functools.lru_cache(maxsize=None)
def driver_version() -> str | None:
    """The NVIDIA driver's version, the one source of it (the tuning table's fingerprint, the
    check report, benchmarks/): as nvidia-smi prints it (NVML, e.g. "580.159.04"); where the
    NVML library cannot be loaded, the CUDA version the driver implements (libcuda's
    cuDriverGetVersion, e.g. "CUDA 13.0"); None without an NVIDIA driver. In-process (ctypes),
    no subprocess: the fingerprint asks for it on every table load."""
    import ctypes
    try:
        nvml = ctypes.CDLL("libnvidia-ml.so.1")
        if nvml.nvmlInit_v2() == 0:
            try:
                buf = ctypes.create_string_buffer(96)
                if nvml.nvmlSystemGetDriverVersion(buf, ctypes.c_uint(len(buf))) == 0 and buf.value:
                    return buf.value.decode()
            finally:
                nvml.nvmlShutdown()
    except (OSError, AttributeError):
        pass
    try:
        version = ctypes.c_int()
        if ctypes.CDLL("libcuda.so.1").cuDriverGetVersion(ctypes.byref(version)) == 0 and version.value:
            return f"CUDA {version.value // 1000}.{version.value % 1000 // 10}"
    except (OSError, AttributeError):
        pass
    return None


def ptxas() -> str | None:
    """"VERSION (PATH)" of the ptxas Triton assembles sm_90 kernels with in this process now, or
    None without Triton's NVIDIA backend. Not always Triton's bundled one: once torch.compile
    has compiled a Triton kernel, inductor names torch's own ptxas (CUDA builds of torch) in
    TRITON_PTXAS_PATH for the rest of the process, and kernels compiled after that (tilefuse's
    too) are assembled by it (docs/design.md, "Which ptxas")."""
    try:
        from triton.backends.nvidia.compiler import get_ptxas
        tool = get_ptxas(90)
        return f"{tool.version} ({tool.path})"
    except Exception:  # noqa: BLE001 - no NVIDIA backend or no ptxas: nothing to report
        return None
