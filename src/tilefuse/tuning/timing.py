"""Timers for sweeps. The sweep owns the protocol (interleaving, rounds, statistics); a timer
only turns "call this on input set i" into a sampler that returns seconds per call.

``CudaTimer`` is the real one. Tests inject a fake with the same two methods, so everything
but the GPU clock is exercised on the CPU.
"""

from __future__ import annotations

import math
from typing import Callable, Protocol

import torch

from ..utils import capture_cuda_graph

Call = Callable[[int], object]   # run the choice on input set i


class Timer(Protocol):
    def buffers(self, input_bytes: int) -> int:
        """How many input sets to rotate through for inputs of ``input_bytes`` each."""

    def prepare(self, label: str, call: Call, n_buffers: int) -> Callable[[], float]:
        """Set up timing of ``call`` (warm-up, graph capture) and return a sampler: each
        call of the sampler measures once and returns seconds per call of ``call``."""


class CudaTimer:
    """CUDA-event timing of launches on one device.

    - Rotation: inputs cycle through enough sets that one pass touches more than twice the
      L2 cache, so no sample reads inputs the previous launch left in L2.
    - CUDA graphs: a call shorter than ``graph_below_s`` is captured (one graph replays one
      call per input set) and replayed, so host launch overhead and the launchers' output
      allocations, which the graph turns into fixed addresses, stay out of the samples.
      Longer calls hide that overhead behind the GPU work and run eagerly.
    - Each sample repeats the step until it lasts ``min_sample_s``, above the event
      resolution (~1 us) and launch jitter.
    """

    MAX_BUFFERS = 64

    def __init__(self, device: torch.device, *, min_sample_s: float = 1e-3,
                 graph_below_s: float = 2e-4, warmup: int = 3):
        self.device = torch.device(device)
        self.min_sample_s = min_sample_s
        self.graph_below_s = graph_below_s
        self.warmup = warmup

    def buffers(self, input_bytes: int) -> int:
        l2 = getattr(torch.cuda.get_device_properties(self.device), "L2_cache_size", 0) or 64 << 20
        return max(1, min(self.MAX_BUFFERS, math.ceil(2 * l2 / max(input_bytes, 1))))

    def _seconds(self, step: Callable[[], object], reps: int) -> float:
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(reps):
            step()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3

    def prepare(self, label: str, call: Call, n_buffers: int) -> Callable[[], float]:
        with torch.cuda.device(self.device):
            def eager():
                for i in range(n_buffers):
                    call(i)

            for _ in range(self.warmup):
                eager()
            per_call = self._seconds(eager, 1) / n_buffers
            step = eager
            if per_call < self.graph_below_s:
                graph, _ = capture_cuda_graph(eager)
                graph.replay()
                step = graph.replay
            reps = max(1, math.ceil(self.min_sample_s / max(per_call * n_buffers, 1e-9)))

        def sample() -> float:
            with torch.cuda.device(self.device):
                return self._seconds(step, reps) / (reps * n_buffers)

        return sample
