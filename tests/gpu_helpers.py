"""Helpers of the GPU-only tests."""

import torch

from tilefuse.utils import capture_cuda_graph


def assert_graph_replay_matches_eager(step) -> None:
    """``step()`` (returning tensors) run eagerly, then captured in a CUDA graph and replayed:
    the replay's outputs are bitwise the eager ones."""
    eager = step()
    graph, captured = capture_cuda_graph(step)
    graph.replay()
    torch.cuda.synchronize()
    assert len(eager) == len(captured)
    for a, b in zip(eager, captured):
        assert torch.equal(a, b)
