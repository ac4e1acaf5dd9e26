"""Helpers for tuning tests (importable by worker processes: no side effects at import)."""


class FakeTimer:
    """A sweep timer for CPU tests: ``fast_s`` per call for the choice named ``fast``, 1 s for
    every other choice."""

    def __init__(self, fast, fast_s=0.9):
        self.fast, self.fast_s = fast, fast_s

    def buffers(self, input_bytes):
        return 2

    def prepare(self, label, call, n_buffers):
        return lambda: self.fast_s if label == self.fast else 1.0


def so2_candidates(monkeypatch, fused=(), relay=(), compose=()):
    """Restrict the so2 sweep's candidates of each route to these configs (None: the real ones)."""
    from tilefuse.ops.so2_mixing_stack import tune as so2_tune
    for name, configs in (("fused_candidates", fused), ("relay_candidates", relay), ("compose_candidates", compose)):
        if configs is not None:
            monkeypatch.setattr(so2_tune, name, lambda lmax, cf, configs=tuple(configs): list(configs))
