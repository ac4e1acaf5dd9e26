"""Gluon's Hopper API as the ops' Gluon kernels import it (so2_mixing_stack.wgmma_kernels,
grouped_glu_mlp.ws_kernels), and where those kernels can run.

Gluon is experimental: a Triton without it leaves every name here None (``gluon is None``), and
the ops then launch their Triton kernels. Its names also move between releases: triton 3.6
calls the TMA load ``async_copy_global_to_shared``, 3.8 ``async_load`` (``tma_load``), and the
store ``async_copy_shared_to_global`` / ``async_store`` (``tma_store``).
"""

from __future__ import annotations

import functools

import torch

from .triton_common import INTERPRETER

try:
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma, warpgroup_mma,
                                                                  warpgroup_mma_wait)
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
except ImportError:
    gluon = gl = fence_async_shared = mbarrier = tma = warpgroup_mma = warpgroup_mma_wait = TensorDescriptor = None

tma_load = None if tma is None else (tma.async_load if hasattr(tma, "async_load")
                                     else tma.async_copy_global_to_shared)
tma_store = None if tma is None else (tma.async_store if hasattr(tma, "async_store")
                                      else tma.async_copy_shared_to_global)


def available(device: torch.device) -> bool:
    """Whether Gluon's Hopper kernels can run on ``device``: the API imported, a CUDA device of
    compute capability 9.x (wgmma and setmaxnreg are sm_90's), and not Triton's interpreter.
    Asked on every launch: the capability is read once per device."""
    if gluon is None or device.type != "cuda" or INTERPRETER:
        return False
    return _hopper(device.index if device.index is not None else torch.cuda.current_device())


@functools.lru_cache(maxsize=None)
def _hopper(index: int) -> bool:
    return torch.cuda.get_device_capability(index)[0] == 9


def available_here() -> bool:
    """``available`` on the current CUDA device (False without one): where a sweep runs."""
    return torch.cuda.is_available() and available(torch.device("cuda", torch.cuda.current_device()))
