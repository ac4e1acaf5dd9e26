"""so2_mixing_stack's tuning family: a sweep's size by the problem's layers (sweep_problem), and
what an exact winner on a level-3 key means at level 3. Dispatch and sizing only: no kernel
runs here."""

import dataclasses
import json
from types import SimpleNamespace

import pytest
import torch

import tilefuse
from tilefuse import tuning
from tilefuse.ops.so2_mixing_stack import configs, op
from tilefuse.ops.so2_mixing_stack import tune as so2_tune
from tilefuse.ops.so2_mixing_stack.configs import So2Config
from tilefuse.ops.so2_mixing_stack.reference import So2Dims
from tilefuse.tuning import store
from tilefuse.tuning.table import register_entries

CUDA = torch.device("cuda", 0)
# total_memory as torch reports it on the cards the shipped tables were swept on
MEMORY = {"nvidia-h100-80gb-hbm3-sm90.json": 85_031_714_816, "nvidia-h200-sm90.json": 150_121_545_728}
PASSES = {"bwd": {}, "fwd": {"forward": True}, "l3": {"level3": True}}


def _fake_memory(monkeypatch, total_memory):
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda d: SimpleNamespace(total_memory=total_memory))


def test_the_peak_grows_with_the_layers_from_the_three_layer_counts():
    """12 surfaces for the exact keys and 28 for a level-3 key at three layers (the counts
    measured there), each further layer adding its z_all surfaces: 2 for a forward key's check
    (the baseline's and the candidate's), 1 for a backward key's and a level-3 key's."""
    peak = {n_layers: {which: so2_tune.sweep_peak_surfaces(so2_tune.So2Problem(6, 96, 4, n_layers=n_layers, **kw))
                       for which, kw in PASSES.items()} for n_layers in (1, 3, 6, 9)}
    assert peak[3] == {"bwd": 12, "fwd": 12, "l3": 28} == peak[1]
    assert peak[6] == {"bwd": 15, "fwd": 18, "l3": 31}
    assert peak[9] == {"bwd": 18, "fwd": 24, "l3": 34}


def test_a_stack_with_more_layers_sweeps_fewer_edges_where_its_peak_would_not_fit(monkeypatch):
    """tilefuse.tune(model) sweeps a key at the model's own layer count: on an 80 GB H100 the
    (6, 128) keys at three layers sweep 2^18 edges (level 3: 2^17); six layers' forward check
    would hold 18 surfaces of 2^18 edges, more than 90% of the card, and sweeps 2^17, its
    level-3 key 2^16; the backward key needs nine layers to halve. Every size swept fits its
    peak, and twice it would not (or is the floor)."""
    total = MEMORY["nvidia-h100-80gb-hbm3-sm90.json"]
    _fake_memory(monkeypatch, total)
    budget = so2_tune.SWEEP_MEMORY_SHARE * total
    swept = {}
    for n_layers in (3, 6, 9):
        for which, kw in PASSES.items():
            p = so2_tune.So2Problem(6, 128, 4, n_layers=n_layers, **kw)
            q = so2_tune.FAMILY.sweep_problem(p, CUDA)
            assert dataclasses.replace(q, n_edges=p.n_edges) == p
            surface = q.n_focus * So2Dims(6, 128).row * q.itemsize
            peak = so2_tune.sweep_peak_surfaces(q)
            assert peak * surface * q.n_edges <= budget
            assert q.n_edges == so2_tune.MIN_SWEEP_EDGES or peak * surface * 2 * q.n_edges > budget
            swept[n_layers, which] = q.n_edges
    assert swept == {(3, "bwd"): 2 ** 18, (3, "fwd"): 2 ** 18, (3, "l3"): 2 ** 17,
                     (6, "bwd"): 2 ** 18, (6, "fwd"): 2 ** 17, (6, "l3"): 2 ** 16,
                     (9, "bwd"): 2 ** 17, (9, "fwd"): 2 ** 17, (9, "l3"): 2 ** 16}


@pytest.mark.parametrize("table", sorted(MEMORY))
def test_the_shipped_tables_record_the_sizes_a_sweep_picks(table, monkeypatch):
    """Every so2 entry of the shipped tables records the problem sweep_problem gives its key on
    that card: ``measured["sweep_problem"]`` where the sweep was resized, nothing where it ran
    the key's own problem."""
    _fake_memory(monkeypatch, MEMORY[table])
    entries = json.loads(store.builtin_dir().joinpath(table).read_text())["families"]["so2_mixing_stack"]
    assert entries
    for key, raw in entries.items():
        p = so2_tune.FAMILY.problem_for_key(key)
        q = so2_tune.FAMILY.sweep_problem(p, CUDA)
        assert raw["measured"].get("sweep_problem") == (None if q == p else repr(q)), key


LMAX, CF, NL = 1, 16, 3


def _level3_dispatch():
    """(forward config, force-backward config) at level 3 for the test's fp32 stack."""
    d = So2Dims(LMAX, CF)
    with tilefuse.level(3):
        return op.forward_config(d, torch.float32, 37, 1, NL), op.backward_config(d, torch.float32, 37, 1, NL, False)


def test_an_exact_winner_on_a_level3_key_runs_level_2s_winners_as_baseline_does(tuning_table):
    """The level-3 key's sweep baseline is the exact heuristic relay: registered as the key's
    winner (accepted, as every family accepts its baseline) it says what "baseline" says, the
    exact path won, so level 3 runs the forward and backward keys' winners, not the heuristic,
    even where its record's speedup would beat level 2's."""
    fwd, bwd = So2Config(64, 64, 16, 4, 2), So2Config(32, 128, 16, 4, 2)
    key = f"L{LMAX}-C{CF}-x4"
    heuristic = configs.heuristic(LMAX, CF)
    assert heuristic.precision == configs.EXACT and heuristic not in (fwd, bwd)
    tuning.register("so2_mixing_stack", {key: bwd, key + "-fwd": fwd})
    tuning.register("so2_mixing_stack", {key + "-l3": "baseline"})
    assert _level3_dispatch() == (fwd, bwd)
    tuning.register("so2_mixing_stack", {key + "-l3": heuristic})
    assert tuning.get_entry("so2_mixing_stack", key + "-l3") == heuristic
    assert _level3_dispatch() == (fwd, bwd)
    # with records that would have it beat level 2 by far
    record = lambda config, us, speedup: {   # noqa: E731
        "winner": so2_tune.FAMILY.config_to_dict(config), "measured": {"baseline_us": us, "speedup": speedup}}
    register_entries("so2_mixing_stack", {key + "-l3": record(heuristic, 1000.0, 3.0),
                                          key: record(bwd, 600.0, 1.01), key + "-fwd": record(fwd, 400.0, 1.01)})
    assert so2_tune.level3_beats_exact(so2_tune.So2Problem(LMAX, CF, 4, level3=True))
    assert _level3_dispatch() == (fwd, bwd)
