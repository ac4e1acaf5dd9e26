"""The built-in tuning tables shipped in the package load whole under the running code: an
entry the loader would ignore (a config field added or renamed without migrating the table)
would silently send its key back to the heuristic on the GPU the table is for."""

import json
import warnings
from pathlib import Path

import pytest

import tilefuse.tuning
from tilefuse.tuning import BASELINE, TableWarning, store

BUILTIN = Path(tilefuse.tuning.__file__).parent / "builtin"
TABLES = sorted(BUILTIN.glob("*.json"))


def test_the_package_ships_a_table():
    assert TABLES, f"no built-in tables under {BUILTIN}"


@pytest.mark.parametrize("path", TABLES, ids=lambda p: p.name)
def test_every_entry_of_a_builtin_table_is_used(path):
    doc = json.loads(path.read_text())
    assert path.name == store.builtin_name(doc["fingerprint"])
    families = store._families_of(doc, lambda found: True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", TableWarning)
        entries = store._valid_entries(families, path.name)
    assert {f: set(e) for f, e in entries.items()} == {f: set(e) for f, e in families.items()}
    for family, by_key in entries.items():
        for key, entry in by_key.items():
            if entry.winner != BASELINE:    # the stored fields are exactly the config's, after a round trip
                assert store.raw_entry(family, entry)["winner"] == families[family][key]["winner"], (family, key)
