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
