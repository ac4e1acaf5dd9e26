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


@pytest.mark.parametrize("gpu", ("NVIDIA H200", "NVIDIA H100 80GB HBM3"))
def test_the_shipped_tables_cover_dyts_grid_and_so2s_issue_shapes(gpu):
    """Both shipped tables hold every key of dyt's standard grid, and so2_mixing_stack's exact,
    forward and level-3 keys at the three shapes issue 15 times ((3, 32), (6, 32), (2, 64));
    grouped_glu_mlp's grid is checked in tests/test_grouped_compose.py."""
    from tilefuse.ops.dyt import tune as dyt_tune
    from tilefuse.ops.so2_mixing_stack import tune as so2_tune
    shipped = store.load_builtin({"gpu": gpu, "capability": "sm90"})
    dyt_keys = {dyt_tune.FAMILY.key(p) for p in dyt_tune.FAMILY.default_problems()}
    assert len(dyt_keys) == 40 and dyt_keys <= set(shipped["dyt"])
    so2_keys = {so2_tune.FAMILY.key(p) for p in so2_tune.FAMILY.default_problems()
                if (p.lmax, p.focus_dim) in so2_tune.DEFAULT_SHAPES[:3]}
    assert len(so2_keys) == 9 and so2_keys <= set(shipped["so2_mixing_stack"])


@pytest.mark.parametrize("path", TABLES, ids=lambda p: p.name)
def test_a_shipped_level3_record_validates_its_own_variant_at_its_own_key_only(path):
    """Each level-3 variant shipped carries the record of its own validation (its key and
    config named, every output's ratio within the limit, all range-limit sets, production-size
    edges): it engages there. The same record under another key, or under another variant of
    its key, validates nothing and is refused."""
    from tilefuse.ops.so2_mixing_stack import tune as so2_tune
    fam = so2_tune.FAMILY
    entries = json.loads(path.read_text())["families"]["so2_mixing_stack"]
    level3 = {key: raw for key, raw in entries.items() if key.endswith("-l3") and raw["winner"] != BASELINE}
    assert level3
    for key, raw in level3.items():
        config, measured = fam.config_from_dict(raw["winner"]), raw["measured"]
        record = measured["validation"]
        assert (record["key"], record["config"]) == (key, config.name)
        assert record["edges"] >= so2_tune.LEVEL3_MIN_EDGES
        assert so2_tune.validation_problems(key, config, record) == []
        fam.check_entry(key, config, measured)
        other_variant = next(c for c in fam.candidates(fam.problem_for_key(key)) if c != config)
        with pytest.raises(ValueError, match="names the config"):
            fam.check_entry(key, other_variant, measured)
        for other_key in level3:   # the same variant where another key holds it, else that key's first
            if other_key != key:
                space = fam.candidates(fam.problem_for_key(other_key))
                other = next((c for c in space if c.name == config.name), space[0])
                with pytest.raises(ValueError, match="names the key"):
                    fam.check_entry(other_key, other, measured)
