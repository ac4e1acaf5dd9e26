"""Launch accounting: every launcher records the kernels it launches.

The tuner uses this to prove a candidate engaged (its kernel actually ran) instead of a guard
or a policy level routing it to the baseline; tests use it to prove which path ran.
"""

from __future__ import annotations

import collections
import contextlib
import threading

from .utils import ThreadBlocks

# Every launch of the process (snapshot()).
_counts: collections.Counter = collections.Counter()
# counting() blocks open, each with its Counter
_blocks = ThreadBlocks()
_lock = threading.Lock()


def record(kernel: str) -> None:
    # Under the lock: a Counter's first count of a kernel runs Python code (__missing__), where
    # another thread's record could switch in and its count be lost (8 threads: 10 of 2400).
    with _lock:
        _counts[kernel] += 1
        if _blocks.open:
            for launched in _blocks.here():
                launched[kernel] += 1


def snapshot() -> collections.Counter:
    """Every launch of the process so far, by kernel, whichever thread made it."""
    return collections.Counter(_counts)


@contextlib.contextmanager
def counting():
    """Yields a Counter that holds the launches made inside the block by this thread, and by
    autograd's device thread while it runs a backward (utils.blocks_here: nested blocks each
    count them). Launches of other Python threads are not counted, their own backwards
    included; autograd's device thread cannot tell whose backward it runs, so on CUDA another
    thread's backward launched meanwhile is counted too."""
    launched: collections.Counter = collections.Counter()
    with _lock:
        token = _blocks.add(launched)
    try:
        yield launched
    finally:
        with _lock:
            _blocks.remove(token)
