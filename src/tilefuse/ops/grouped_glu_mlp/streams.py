"""grouped_glu_mlp's second stream: work that depends only on tensors already made runs beside
the GEMM chain of the caller's stream, so the next kernel takes the SMs that a persistent GEMM's
last wave leaves idle, or a memory-bound quantizer runs while a GEMM computes.

Where it is used: compose.py's backward (the Gluon weight gradients beside the dgrads, module
docstring "Two streams") and launch.py's kernels route (the weight gradients and, for a
quantized recipe, the column-wise quantizers of their operands not made before the fork
beside the dgrads: fp8_block's dz's where the dGLU epilogue writes dz's row-wise copy, the
other recipes' all four; fc2's weight quantizer
beside fc1), unless the tuned config's ``side_stream`` is off (GemmConfig: a per-key choice of the
sweep). Off CUDA there is no second stream: the same work runs in order on the caller's stream.

Measured on the H200, the op as called (graph replay, interleaved rounds; the ratio to the same
op on one stream, from per-round ratios; benchmarks/results/2026-12-04-h200-ag), spec shapes
1-3: bf16 (compose route) 1.011x / 1.013x / 1.037x with the side stream at the default
priority and 0.995x / 0.980x / 0.995x at high priority (run 4), 1.029x / 1.031x / 1.030x at
the default (run 5); fp8_block (kernels route) 1.034x / 1.023x / 1.057x at high priority and
1.019x / 1.020x / 1.034x at the default (run 4), 1.015x / 1.008x / 1.017x at high priority
(run 5). Hence ``HIGH`` for the kernels route with a recipe only (without one it is
unmeasured: the default).

Host cost (results/2026-12-04-h200-ah run 2, spec shape 2): a fork takes 60-80 us of host time
where it runs, with the side-stream launch that follows it, and the join about 19 us; the op's
forward + backward call 1.17-1.33x as long on the host as on one stream (-ag run 8), behind
2.3-6 ms of device time at the spec shapes.

Memory: what the side stream allocates (a recipe's W2 copies and the column-wise copies for
the weight gradients) the caching allocator keeps in that stream's own pool, reused there step
after step, not by the caller's stream; the compose route allocates nothing there (its outputs
come from the caller's stream).

The rules that keep it safe:
- a fork (``on_side``) makes the side stream wait for everything enqueued on the caller's
  stream so far, so side work reads finished inputs;
- tensors the side stream reads or writes that were allocated on the caller's stream stay
  referenced until the ``join``, after which the caller's stream is ordered after the side
  stream's work, so the allocator cannot hand their memory out while it is in use;
- tensors allocated on the side stream that the caller's stream goes on to use are recorded
  on it (``caller_uses``: ``record_stream``), so their memory goes back to the side stream's
  pool only once the caller's stream is done with them, even when a later call forks from
  another stream; the rest of the side stream's allocations are used on it alone;
- every fork is joined before the function returns (also what CUDA-graph capture requires: the
  fork and the join are captured as graph edges, and the side stream's allocations go to the
  graph's pool, as every stream of a capture's do), also when it returns by an exception
  (``joined``: the caller-stream tensors the side work writes, a weight gradient, are freed
  only then);
- every join follows a fork (``joined`` forks as its region starts): a capturing stream may
  not wait on a stream outside the capture.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import TypeVar

import torch

# Tests turn it off to compare bits with one stream.
BESIDE = True
# A torch.cuda.Stream priority above the default (0; lower is higher): the block scheduler then
# hands the side stream's waiting blocks the SMs that free up before the caller's. The kernels
# route's quantizers take it (memory-bound blocks in among a GEMM's); the compose route's
# persistent weight gradients do not (they would take SMs from the dgrad they are to follow).
HIGH = -1
# Side streams per thread: each thread keeps the stream torch gave it on first use. That does
# not keep threads apart: torch.cuda.Stream hands out pooled streams round-robin (32 a device
# and priority, shared with every other draw in the process), and every CUDA backward runs on
# autograd's one thread per device, whichever thread called it. So capturing a CUDA graph in
# one thread while another runs this module's eager side work on the same device may fail the
# capture (CUDA's capture isolation error), as other concurrent CUDA work can; results are never
# wrong. Should a pooled stream come back as the caller's own, the fork and join are no-ops
# and the work runs in order: same results.
_LOCAL = threading.local()
R = TypeVar("R")


def side_stream(t: torch.Tensor, priority: int = 0) -> torch.cuda.Stream | None:
    """The calling thread's second stream of ``priority`` for ``t``'s device (made on first
    use), or None off CUDA or with ``BESIDE`` off."""
    if not (BESIDE and t.is_cuda):
        return None
    streams = getattr(_LOCAL, "streams", None)
    if streams is None:
        streams = _LOCAL.streams = {}
    key = (t.device.index, priority)
    stream = streams.get(key)
    if stream is None:
        stream = streams[key] = torch.cuda.Stream(t.device, priority=priority)
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


def caller_uses(side: torch.cuda.Stream | None, device: torch.device, *tensors: torch.Tensor | None) -> None:
    """Record on the caller's stream the ``tensors`` (None skipped) that ``side`` allocated and
    the caller's stream uses after the ``join`` (``Tensor.record_stream``; the caching
    allocator defers such bookkeeping while a CUDA graph is being captured)."""
    if side is not None:
        caller = torch.cuda.current_stream(device)
        for t in tensors:
            if t is not None:
                t.record_stream(caller)


@contextlib.contextmanager
def joined(side: torch.cuda.Stream | None, device: torch.device):
    """A region whose forks onto ``side`` are joined when it ends, however it ends: an exception
    (an OOM between the fork and the join, say) still makes the caller's stream wait for the
    side work before the tensors that work writes go back to the allocator; a failure of that
    wait itself (a broken context) does not hide the exception.

    The region forks once as it starts, so its join always follows a fork, also where none of
    its work went to ``side`` after all (a weight gradient that fell back to the caller's
    stream, say): under CUDA-graph capture a stream may wait only on work captured with it, so
    the join of a side stream never forked into the capture would invalidate the capture."""
    on_side(side, device, lambda: None)
    try:
        yield
    except BaseException:
        with contextlib.suppress(Exception):
            join(side, device)
        raise
    join(side, device)
