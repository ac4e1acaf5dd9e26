"""Device facts the launchers need (cached)."""

from __future__ import annotations

import functools

import torch

# Under Triton's interpreter on the CPU a "device" has this many SMs: small, so persistent
# loops run several iterations per program at test sizes.
INTERPRETER_SMS = 2


@functools.lru_cache(maxsize=None)
def _cuda_sms(index: int) -> int:
    return torch.cuda.get_device_properties(index).multi_processor_count


def num_sms(device: torch.device) -> int:
    if device.type == "cuda":
        return _cuda_sms(device.index if device.index is not None else torch.cuda.current_device())
    return INTERPRETER_SMS


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
