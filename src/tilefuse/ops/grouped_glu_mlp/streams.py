"""grouped_glu_mlp's second stream: work that depends only on tensors already made runs beside
the GEMM chain of the caller's stream, so the next kernel takes the SMs that a persistent GEMM's
last wave leaves idle, or a memory-bound quantizer runs while a GEMM computes.

Where it is used: compose.py's backward (the Gluon weight gradients beside the dgrads, module
docstring "Two streams") and launch.py's kernels route (the weight gradients and, for a
quantized recipe, their column-wise quantizers beside the dgrads; fc2's weight quantizer beside
fc1). Off CUDA there is no second stream: the same work runs in order on the caller's stream.

The rules that keep it safe, with no ``record_stream``:
- a fork (``on_side``) makes the side stream wait for everything enqueued on the caller's
  stream so far, so side work reads finished inputs, and any memory it reuses from the side
  stream's own pool was last used by work enqueued before that fork;
- tensors the side stream reads or writes that were allocated on the caller's stream stay
  referenced until the ``join``, after which the caller's stream is ordered after the side
  stream's work, so the allocator cannot hand their memory out while it is in use;
- every fork is joined before the function returns (also what CUDA-graph capture requires: the
  fork and the join are captured as graph edges, and the side stream's allocations go to the
  graph's pool, as every stream of a capture's do).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import torch

# Tests turn it off to compare bits with one stream.
BESIDE = True
# torch.cuda.Stream priority of the side stream (lower is higher; 0 the default).
PRIORITY = 0
_STREAMS: dict = {}
R = TypeVar("R")


def side_stream(t: torch.Tensor) -> torch.cuda.Stream | None:
    """The second stream for ``t``'s device (one per device and priority, made on first use),
    or None off CUDA or with ``BESIDE`` off."""
    if not (BESIDE and t.is_cuda):
        return None
    key = (t.device.index, PRIORITY)
    stream = _STREAMS.get(key)
    if stream is None:
        stream = _STREAMS[key] = torch.cuda.Stream(t.device, priority=PRIORITY)
    return stream


def on_side(side: torch.cuda.Stream | None, device: torch.device, fn: Callable[[], R]) -> R:
    """``fn()`` with its launches and allocations on ``side`` once it has waited for everything
    enqueued so far on the caller's stream (the fork), or on the caller's stream where ``side``
    is None."""
    if side is None:
        return fn()
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):
        return fn()


def join(side: torch.cuda.Stream | None, device: torch.device) -> None:
    """The caller's stream waits for ``side``'s work."""
    if side is not None:
        torch.cuda.current_stream(device).wait_stream(side)
