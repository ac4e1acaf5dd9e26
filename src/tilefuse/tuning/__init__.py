"""The tuning mechanism shared by every op (see DESIGN.md). Lookup side only for now."""

from __future__ import annotations


def lookup_config(family: str, problem):
    """The tuned config for ``problem`` in ``family``, or None (absent, or baseline won)."""
    return None
