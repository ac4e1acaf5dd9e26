"""Launch accounting: every launcher records the kernels it launches.

The tuner uses this to prove a candidate engaged (its kernel actually ran) instead of a guard
or a policy level routing it to the baseline; tests use it to prove which path ran.
"""

from __future__ import annotations

import collections
import contextlib

_counts: collections.Counter = collections.Counter()


def record(kernel: str) -> None:
    _counts[kernel] += 1


def snapshot() -> collections.Counter:
    return collections.Counter(_counts)


@contextlib.contextmanager
def counting():
    """Yields a Counter that, on exit, holds the launches made inside the block."""
    before = snapshot()
    delta: collections.Counter = collections.Counter()
    try:
        yield delta
    finally:
        after = snapshot()
        for k, v in after.items():
            if v - before.get(k, 0):
                delta[k] = v - before.get(k, 0)
