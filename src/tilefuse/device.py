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
