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
import functools
import importlib
import types
import typing
from pathlib import Path
from typing import Any, Mapping

import torch

# The entry recorded when the family's baseline won (or nothing beat it by the margin).
BASELINE = "baseline"

# A candidate must beat the baseline by this fraction: its speedup (baseline time over its
# time, the median of the per-round ratios) at least 1 + the margin. A route change
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
    #: Files whose content decides which configs are valid and how fast they are: a built-in
    #: family's are hashed into the table fingerprint (an edit starts a fresh cache file), a
    #: registered family's into a hash stored beside its entries (an edit makes this process
    #: ignore them until swept again; store.py).
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

    def check_key(self, key: str):
        """``problem_for_key(key)``, and ValueError unless ``key`` is written as the family
        writes it (``key(problem_for_key(key)) == key``): a key with leading zeros, say,
        parses but no call ever looks it up, so an entry under it would never run."""
        problem = self.problem_for_key(key)
        canonical = self.key(problem)
        if canonical != key:
            raise ValueError(f"{key!r} is not a {self.name} key as the family writes it ({canonical!r})")
        return problem

    # --- configs ----------------------------------------------------------------------
    #: The family's config dataclass, stored field by field by the two methods below
    #: (a family whose configs are not such a dataclass overrides them).
    config_class: type | None = None

    def config_from_dict(self, d: Mapping[str, Any]):
        """Parse a stored config: ValueError on unknown or missing fields, TypeError naming
        the field whose value does not have the field's declared type (``check_config_fields``:
        an ``int`` field takes an int, never a float or a bool), ValueError for values the
        dataclass rejects when constructed (ranges, powers of two)."""
        cls = self.config_class
        fields = {f.name for f in dataclasses.fields(cls)}
        if not isinstance(d, Mapping) or set(d) != fields:
            raise ValueError(f"a {cls.__name__} has the fields {sorted(fields)}, got {d!r}")
        check_config_fields(cls, d)
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

    def sweep_candidates(self, problem) -> list:
        """The candidates a sweep on the current device times: ``candidates`` (the config space
        a table entry is checked against), less any that would run here exactly what the
        baseline or an earlier candidate runs (a kernel that does not run on this device,
        whose config then falls back to the same path). Timing such a candidate would time
        the baseline against itself and could record noise as a winner."""
        return self.candidates(problem)

    @abc.abstractmethod
    def change(self, config) -> str:
        """``TILE`` or ``ROUTE``: what adopting ``config`` changes, which sets its margin."""

    def route_rank(self, config) -> int:
        """How far ``config``'s route is from the simplest: a candidate of a higher rank wins
        only where it beats the best timed candidate of every lower rank by the route margin
        (the rule's "best unfused route": a fused kernel is measured against the fastest
        unfused tiling, not only against the baseline). The default ranks tile changes 0 and
        route changes 1; a family with a ladder of routes (so2: relay tilings, the
        composition, the fused kernel) ranks its rungs."""
        return 0 if self.change(config) == TILE else 1

    @abc.abstractmethod
    def complexity(self, config) -> tuple:
        """Sort key: smaller is simpler. Within 1% of the best time, the simpler config wins."""

    def describe(self, choice) -> str:
        """Short human name of a choice, used in results and error messages."""
        return getattr(choice, "name", str(choice))

    # --- running ----------------------------------------------------------------------
    def sweep_problem(self, problem, device: torch.device):
        """The problem a sweep of ``problem`` runs on ``device``: ``problem`` itself by
        default. A family whose representative problem may not fit a device's memory returns
        a smaller one with the same key (a size the key does not depend on); the sweep then
        records it in the entry's ``measured["sweep_problem"]``."""
        return problem

    def check_problem(self, problem):
        """The problem a candidate's correctness check runs (sweep.py): ``problem`` itself by
        default. A family whose swept size fills its tiles exactly (a power-of-two row or edge
        count) returns one of the same key whose size leaves a partial last tile, so that a
        config wrong only there is rejected, not recorded; timing keeps ``problem``."""
        return problem

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

    def validate(self, problem, choice, inputs, got: dict, want: dict) -> tuple[list[str], dict | None]:
        """(mismatch messages, validation record) of candidate ``choice`` against the baseline.

        The default is ``compare`` and no record. A family whose candidates need more than a
        comparison with the baseline (a reduced-precision variant validated against a float64
        reference, on extra inputs it runs itself) overrides this; a record it returns for the
        winner is stored in the entry's ``measured["validation"]``, where ``check_entry`` can
        demand it."""
        return self.compare(problem, inputs, got, want), None

    def check_entry(self, key: str, config, measured: Mapping) -> None:
        """Raise ValueError when a table entry choosing ``config`` for ``key`` must not be
        used, given its ``measured`` fields (e.g. a variant without its recorded validation).
        The default accepts every entry whose config ``is_valid``."""

    # --- entry points -----------------------------------------------------------------
    @abc.abstractmethod
    def default_problems(self) -> list:
        """The standard shape grid (``tilefuse tune --all-defaults``)."""

    @abc.abstractmethod
    def problems_from_cli(self, shape: str, dtype: str | None, pass_: str | None) -> list:
        """Problems for ``tilefuse tune --shape SHAPE [--dtype D] [--pass P]``; ValueError
        with a usage hint on a malformed shape or an unknown dtype/pass."""


def argument_error(exc: Exception, prefix: str) -> Exception:
    """``exc`` (a TypeError or ValueError) with ``prefix`` before its message, same kind."""
    return (TypeError if isinstance(exc, TypeError) else ValueError)(f"{prefix}: {exc}")


def resolve_key(family: TuningFamily, key_or_problem, what: str) -> tuple[str, Any]:
    """(key, problem) for ``key_or_problem``, a table key of ``family`` (validated; the problem
    is its representative) or one of its problems. ValueError for a string that is not a key
    of the family, TypeError for anything that is neither; both name ``what``, the argument."""
    if isinstance(key_or_problem, str):
        try:
            return key_or_problem, family.check_key(key_or_problem)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{what}: {exc}") from None
    try:
        key = family.key(key_or_problem)
    except Exception as exc:
        # why the family's key() failed helps only for a problem-like object (a dataclass of
        # another family, say), not for an int or a list
        why = f": {type(exc).__name__}: {exc}" if dataclasses.is_dataclass(key_or_problem) else ""
        raise TypeError(f"{what} must be a {family.name} key (str) or a {family.name} problem, got "
                        f"{key_or_problem!r} ({type(key_or_problem).__name__}){why}") from None
    if not isinstance(key, str):
        raise TypeError(f"{what}: family {family.name!r} made the key {key!r} of {key_or_problem!r}, "
                        f"not a str")
    return key, key_or_problem


# --- config field types ------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def _field_types(cls: type) -> tuple[tuple[str, Any], ...]:
    """(field name, declared type) of dataclass ``cls``; a field whose annotation cannot be
    resolved is left out (not checked)."""
    try:
        hints = typing.get_type_hints(cls)
    except Exception:   # an annotation naming something not importable here: check the rest
        hints = {}
    out = []
    for f in dataclasses.fields(cls):
        declared = hints.get(f.name, f.type)
        if not isinstance(declared, str):
            out.append((f.name, declared))
    return tuple(out)


def _has_type(value, declared) -> bool:
    """Whether ``value`` is of the declared field type, strictly: an ``int`` field takes an
    int and not a bool (``True == 1`` would pass the config-space check) nor a float (``64.0 ==
    64`` too, and then fails at launch); a ``float`` field takes an int or a float, not a bool.
    Unions (``X | None``, ``Optional``), ``Literal`` and classes are understood; for a
    parameterized generic (``tuple[int, ...]``) only the container class is checked."""
    if declared is Any:
        return True
    if declared is None or declared is type(None):
        return value is None
    origin = typing.get_origin(declared)
    if origin is typing.Union or origin is types.UnionType:
        return any(_has_type(value, arg) for arg in typing.get_args(declared))
    if origin is typing.Literal:
        return any(value == arg and type(value) is type(arg) for arg in typing.get_args(declared))
    if origin is not None:
        return isinstance(origin, type) and isinstance(value, origin)
    if declared is bool:
        return isinstance(value, bool)
    if declared is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if declared is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if isinstance(declared, type):
        return isinstance(value, declared)
    return True   # an annotation that is not a type (a TypeVar, a string): nothing to check


def _type_name(declared) -> str:
    return declared.__name__ if isinstance(declared, type) else str(declared).replace("typing.", "")


def check_config_fields(cls: type, values) -> None:
    """TypeError naming the first field of config dataclass ``cls`` whose value in ``values``
    (a mapping of field name -> value) is not of the field's declared
    type. The one type check of the tuning mechanism: it runs on every config read from a
    table file or registered at runtime, driven by the dataclass's annotations, so an op's
    config class states its field types once and needs no check of its own (ranges and
    powers of two stay the class's ``__post_init__`` and the family's ``is_valid``)."""
    for name, declared in _field_types(cls):
        value = values.get(name)
        if not _has_type(value, declared):
            raise TypeError(f"{cls.__name__}.{name} must be {_type_name(declared)}, "
                            f"got {value!r} ({type(value).__name__})")


# --- the registry ----------------------------------------------------------------------

def register_family(family: TuningFamily) -> None:
    """Make ``family`` known to the table (for families outside tilefuse, and tests).

    Families shipped with tilefuse are listed in ``BUILTIN_FAMILIES`` and load on demand.
    The table files are read again on the next lookup, so entries of ``family`` already in
    them (written by another process that knew it) become visible.
    """
    if not isinstance(family, TuningFamily):
        raise TypeError(f"register_family: family must be a TuningFamily, got {type(family).__name__}")
    name = getattr(family, "name", None)
    if not isinstance(name, str) or not name:
        raise TypeError(f"register_family: family.name must be a non-empty str, got {name!r}")
    # A built-in's name belongs to the built-in whether or not it has loaded yet.
    existing = get_family(name) if name in BUILTIN_FAMILIES else _families.get(name)
    if existing is not None and existing is not family:
        kind = "built-in " if name in BUILTIN_FAMILIES else ""
        raise ValueError(f"register_family: a {kind}tuning family named {name!r} is already registered")
    _families[name] = family
    if existing is None:
        from . import table   # table imports this module: imported on use
        table.reload()


def unregister_family(name: str) -> None:
    """Forget a family registered with ``register_family`` (built-ins reload on demand), and
    with it every lookup made under it (the table's memo, its runtime registrations)."""
    _check_name(name, "unregister_family: name")
    _families.pop(name, None)
    from . import table   # table imports this module
    table.forget_family(name)


def _check_name(name, what: str) -> None:
    if not isinstance(name, str):
        raise TypeError(f"{what} must be a tuning family name (str), got {name!r} "
                        f"({type(name).__name__}); known: {', '.join(family_names())}")


def family_argument(name, caller: str) -> TuningFamily:
    """``get_family(name)`` for public entry point ``caller``: its errors name the caller and
    the ``family`` argument."""
    try:
        return get_family(name)
    except (TypeError, ValueError) as exc:
        raise argument_error(exc, caller) from None


def get_family(name: str) -> TuningFamily:
    """The family called ``name``; TypeError if ``name`` is not a str, ValueError naming the
    known families if there is no such family."""
    _check_name(name, "family")
    family = _families.get(name)
    if family is not None:
        return family
    module = BUILTIN_FAMILIES.get(name)
    if module is None:
        raise ValueError(f"unknown tuning family {name!r}; known: {', '.join(family_names())}")
    family = importlib.import_module(module).FAMILY
    _families[name] = family
    return family


def family_names() -> list[str]:
    return sorted(set(BUILTIN_FAMILIES) | set(_families))
