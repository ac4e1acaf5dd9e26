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


def one_and_two_streams(monkeypatch, step):
    """(step() with grouped_glu_mlp's second stream off, step() with it on, the stream each
    streams.on_side call was given while on (None: the caller's)): two-stream results to
    compare with one stream's bits."""
    from tilefuse.ops.grouped_glu_mlp import streams
    monkeypatch.setattr(streams, "BESIDE", False)
    want = step()
    monkeypatch.setattr(streams, "BESIDE", True)
    sides = []
    on_side = streams.on_side
    monkeypatch.setattr(streams, "on_side", lambda side, dev, fn: sides.append(side) or on_side(side, dev, fn))
    got = step()
    torch.cuda.synchronize()
    return want, got, sides
