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


def _winner(timed):
    from tilefuse.tuning.sweep import TIMED, CandidateResult, choose_winner
    return choose_winner(so2_tune.FAMILY, [CandidateResult(c.name, c, TIMED, speedup=s) for c, s in timed])


def test_fusion_and_the_composition_are_measured_against_the_best_unfused_route():
    """The spec: fused candidates and relay tilings against the best unfused route, the unfused
    route recorded where fusion does not win by the 3% margin. Ranks: relay tilings 0, the
    composition 1, fused 2; on a level-3 key the relay splits 0 and the fused 3xfp16 route 2."""
    relay = configs.relay_candidates(3, 32)[0]
    compose = configs.compose_candidates(3, 32)[0]
    fused = configs.fused_candidates(3, 32)[0]
    fam = so2_tune.FAMILY
    assert [fam.route_rank(c) for c in (relay, compose, fused)] == [0, 1, 2]
    assert _winner([(relay, 1.50), (fused, 1.52)]) == relay         # 1.3% over the tiling
    assert _winner([(relay, 1.50), (compose, 1.52)]) == relay
    assert _winner([(relay, 1.50), (fused, 1.55)]) == fused         # 3.3% over it
    assert _winner([(relay, 1.50), (compose, 1.53), (fused, 1.56)]) == relay   # neither clears its rungs
    assert _winner([(relay, 1.50), (compose, 1.55), (fused, 1.58)]) == compose  # fused 1.9% over compose
    assert _winner([(relay, 1.005), (fused, 1.034)]) == tuning.BASELINE    # a tiling that lost still sets the bar
    assert _winner([(compose, 1.02), (fused, 1.06)]) == fused       # no tiling timed: over the composition
    # level 3: a split relay and the fused 3xfp16 route; each over the exact baseline by 3%
    l3 = configs.level3_candidates(3, 32)
    split = next(c for c in l3 if not c.fused)
    fused3 = next(c for c in l3 if c.fused)
    assert (fam.route_rank(split), fam.route_rank(fused3)) == (0, 2)
    assert _winner([(split, 1.50), (fused3, 1.52)]) == split
    assert _winner([(split, 1.50), (fused3, 1.55)]) == fused3
    assert _winner([(split, 1.02)]) == tuning.BASELINE


def test_a_level3_key_sweeps_at_least_production_size_edges(monkeypatch):
    """tilefuse.tune(model, example) sweeps a level-3 key at the example's edge count: raised to
    LEVEL3_MIN_EDGES on every device (its validation's size; check_entry refuses fewer) and
    never halved below it for memory. Exact keys keep the example's edges."""
    assert so2_tune.LEVEL3_MIN_EDGES >= so2_tune.MIN_SWEEP_EDGES
    small = so2_tune.So2Problem(1, 16, 4, n_edges=128, n_focus=1, n_layers=2, level3=True)
    for device, total in ((torch.device("cpu"), None), (CUDA, MEMORY["nvidia-h100-80gb-hbm3-sm90.json"]),
                          (CUDA, 1 << 30)):
        if total is not None:
            _fake_memory(monkeypatch, total)
        q = so2_tune.FAMILY.sweep_problem(small, device)
        assert q == dataclasses.replace(small, n_edges=so2_tune.LEVEL3_MIN_EDGES), device
        exact = dataclasses.replace(small, level3=False)
        assert so2_tune.FAMILY.sweep_problem(exact, device) == exact
    big = so2_tune.So2Problem(6, 128, 4, n_layers=9, level3=True)   # memory would halve it further
    _fake_memory(monkeypatch, 1 << 30)
    assert so2_tune.FAMILY.sweep_problem(big, CUDA).n_edges == so2_tune.LEVEL3_MIN_EDGES
