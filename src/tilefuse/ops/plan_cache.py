"""The call-plan cache both ops' plans use (ops/dyt/plan.py, ops/grouped_glu_mlp/plan.py): a dict
of plans by key, at most ``limit()`` of them (the oldest goes first), written under a lock so
that threads calling the op at once never tear it. Reads take no lock (a dict lookup is
atomic); two threads that miss at once both build a plan, and the later store wins."""

from __future__ import annotations

import threading
from typing import Any, Callable


class PlanCache:
    __slots__ = ("_plans", "_lock", "_limit", "get")

    def __init__(self, limit: Callable[[], int]):
        self._plans: dict = {}
        self._lock = threading.Lock()
        self._limit = limit          # read at each store: the owning module's MAX_PLANS
        self.get = self._plans.get

    def store(self, key, plan: Any) -> None:
        limit = self._limit()
        if limit <= 0:   # caching off
            return
        with self._lock:
            while len(self._plans) >= limit:
                del self._plans[next(iter(self._plans))]
            self._plans[key] = plan

    def __len__(self) -> int:
        return len(self._plans)

    def clear(self) -> None:
        with self._lock:
            self._plans.clear()
