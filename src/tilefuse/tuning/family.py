"""What an op family tells the tuning mechanism, and the registry of families.

A family owns everything op-specific: how a problem maps to a table key, its config space, its
baseline (the path that runs when the table has no winner), how to build inputs, run one
choice, and compare outputs. The mechanism (table, storage, sweep, timing) is shared and knows
nothing about any op. Families are registered by module path and imported on first use, so
``tilefuse.tuning`` never imports an op at import time (ops import the tuning lookup).
"""

from __future__ import annotations

import abc
import dataclasses
import importlib
from pathlib import Path
from typing import Any, Mapping

import torch

# The entry recorded when the family's baseline won (or nothing beat it by the margin).
BASELINE = "baseline"

# A candidate must beat the baseline by this fraction of its time to win. A route change
# (fused vs unfused, a different algorithm) carries more risk across inputs and library
# versions than a tile change within one kernel, so it needs the larger margin.
TILE = "tile"
ROUTE = "route"
MARGINS = {TILE: 0.01, ROUTE: 0.03}

# The x dtypes `tilefuse tune --dtype` names; a family keys on the itemsize.
CLI_DTYPES = {"fp32": torch.float32, "float32": torch.float32, "bf16": torch.bfloat16,
              "bfloat16": torch.bfloat16, "fp16": torch.float16, "float16": torch.float16}


def cli_itemsize(op: str, name: str, also: tuple[str, ...] = ()) -> int:
    """The itemsize of ``--dtype name``; ValueError naming the accepted names (and ``also``,
    names the family handles itself) otherwise."""
    if name not in CLI_DTYPES:
        raise ValueError(f"{op}: --dtype must be one of {', '.join((*CLI_DTYPES, *also))}, got {name!r}")
    return CLI_DTYPES[name].itemsize


# Families shipped with tilefuse: name -> module holding ``FAMILY``. Their kernel sources make
# up the table fingerprint (store.py), so a kernel edit starts a fresh table.
BUILTIN_FAMILIES = {
    "dyt": "tilefuse.ops.dyt.tune",
    "so2_mixing_stack": "tilefuse.ops.so2_mixing_stack.tune",
    "grouped_glu_mlp": "tilefuse.ops.grouped_glu_mlp.tune",
}

_families: dict[str, "TuningFamily"] = {}


class TuningFamily(abc.ABC):
    """One op family's side of the tuning contract.

    ``problem``: the family's own frozen, hashable description of one launch (what the
    launcher knows before it launches). ``config``: a frozen, hashable config object. A
    ``choice`` is either a config or the family's baseline (``baseline(problem)``).
    """

    #: Table name of the family ("dyt").
    name: str
    #: Files whose content decides which configs are valid and how fast they are; hashed
    #: into the table fingerprint.
    source_files: tuple[Path, ...]

    # --- keys -------------------------------------------------------------------------
    @abc.abstractmethod
    def key(self, problem) -> str:
        """The table key of ``problem``: exact where a size changes the generated code,
        bucketed where it varies per call. Called on the hot path: keep it cheap."""

    @abc.abstractmethod
    def problem_for_key(self, key: str):
        """A representative problem of ``key`` (``key(problem_for_key(k)) == k``).
        Raises ValueError when ``key`` is not a key of this family."""

    # --- configs ----------------------------------------------------------------------
    #: The family's config dataclass, stored field by field by the two methods below
    #: (a family whose configs are not such a dataclass overrides them).
    config_class: type | None = None

    def config_from_dict(self, d: Mapping[str, Any]):
        """Parse a stored config; ValueError on unknown or missing fields or bad values (those
        the dataclass rejects when constructed)."""
        cls = self.config_class
        fields = {f.name for f in dataclasses.fields(cls)}
        if not isinstance(d, Mapping) or set(d) != fields:
            raise ValueError(f"a {cls.__name__} has the fields {sorted(fields)}, got {d!r}")
        try:
            return cls(**d)
        except TypeError as exc:
            raise ValueError(str(exc)) from None

    def config_to_dict(self, config) -> dict:
        return dataclasses.asdict(config)

    @abc.abstractmethod
    def is_valid(self, key: str, config) -> bool:
        """Whether ``config`` may be used for every problem of ``key`` (it is in the pruned
        config space). Table entries that fail this are reported and ignored."""

    @abc.abstractmethod
    def baseline(self, problem):
        """The choice that runs when the table has no winner (the default path)."""

    @abc.abstractmethod
    def candidates(self, problem) -> list:
        """The pruned configs to try against the baseline, the baseline itself excluded."""

    @abc.abstractmethod
    def change(self, config) -> str:
        """``TILE`` or ``ROUTE``: what adopting ``config`` changes, which sets its margin."""

    @abc.abstractmethod
    def complexity(self, config) -> tuple:
        """Sort key: smaller is simpler. Within 1% of the best time, the simpler config wins."""

    def describe(self, choice) -> str:
        """Short human name of a choice, used in results and error messages."""
        return getattr(choice, "name", str(choice))

    # --- running ----------------------------------------------------------------------
    @abc.abstractmethod
    def make_inputs(self, problem, device: torch.device, seed: int):
        """Fresh random inputs for ``problem`` on ``device`` (deterministic in ``seed``)."""

    @abc.abstractmethod
    def input_bytes(self, problem) -> int:
        """Bytes one input set reads; decides how many sets the timer rotates through."""

    @abc.abstractmethod
    def run(self, problem, choice, inputs) -> dict[str, torch.Tensor]:
        """Run ``choice`` on ``inputs``; return the outputs by name. Outputs must be freshly
        allocated by the launcher (the sweep poisons fresh allocations with NaN)."""

    @abc.abstractmethod
    def expected_launches(self, problem, choice) -> tuple[str, ...]:
        """Kernel names (``tilefuse.launches``) that must launch when ``choice`` runs: the
        proof that it engaged and was not routed elsewhere by a policy or a guard."""

    @abc.abstractmethod
    def compare(self, problem, inputs, got: dict, want: dict) -> list[str]:
        """Compare a candidate's outputs with the baseline's on the same inputs, bitwise
        where the op's contract says so, else with the op's derived tolerance. Returns one
        message per mismatch (empty: equal). Non-finite values are checked by the sweep."""

    # --- entry points -----------------------------------------------------------------
    @abc.abstractmethod
    def default_problems(self) -> list:
        """The standard shape grid (``tilefuse tune --all-defaults``)."""

    @abc.abstractmethod
    def problems_from_cli(self, shape: str, dtype: str | None, pass_: str | None) -> list:
        """Problems for ``tilefuse tune --shape SHAPE [--dtype D] [--pass P]``; ValueError
        with a usage hint on a malformed shape or an unknown dtype/pass."""


def register_family(family: TuningFamily) -> None:
    """Make ``family`` known to the table (for families outside tilefuse, and tests).

    Families shipped with tilefuse are listed in ``BUILTIN_FAMILIES`` and load on demand.
    """
    if not isinstance(family, TuningFamily):
        raise TypeError(f"register_family needs a TuningFamily, got {type(family).__name__}")
    existing = _families.get(family.name)
    if existing is not None and existing is not family:
        raise ValueError(f"a tuning family named {family.name!r} is already registered")
    _families[family.name] = family


def unregister_family(name: str) -> None:
    """Forget a family registered with ``register_family`` (built-ins reload on demand)."""
    _families.pop(name, None)


def get_family(name: str) -> TuningFamily:
    """The family called ``name``; ValueError naming the known families otherwise."""
    family = _families.get(name)
    if family is not None:
        return family
    module = BUILTIN_FAMILIES.get(name) if isinstance(name, str) else None
    if module is None:
        raise ValueError(f"unknown tuning family {name!r}; known: {', '.join(family_names())}")
    family = importlib.import_module(module).FAMILY
    _families[name] = family
    return family


def family_names() -> list[str]:
    return sorted(set(BUILTIN_FAMILIES) | set(_families))
