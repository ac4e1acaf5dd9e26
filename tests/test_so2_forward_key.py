"""so2_mixing_stack's forward keys (``L{lmax}-C{cf}-x{itemsize}-fwd``): the forward's tiles are
tuned like the backward's route, and the forward runs the key's winner at level >= 2 only.

The sweep's check is bitwise: a relay tiling keeps every output element's K order, so the
forward's outputs (x_local and the saved z, u_final, which the backward routes read) must equal
the heuristic tiles' exactly. On the CPU the kernels run in the interpreter (tilefuse's exact
interpreter dot, so equality does not depend on the machine's BLAS); a fake timer picks the
winner.
"""

import pytest
import torch

import tilefuse
from tilefuse import tuning
from tilefuse.ops.so2_mixing_stack import configs, kernels, launch
from tilefuse.ops.so2_mixing_stack import tune as so2_tune
from tilefuse.ops.so2_mixing_stack.configs import So2Config
from tilefuse.tuning.sweep import REJECTED, TIMED

from test_so2_kernels import make
from tuning_helpers import FakeTimer, LaunchSpy, perturb_so2_runs

LMAX, CF = 1, 16
TILE = So2Config(64, 64, 16, 4, 2)      # a relay tiling other than the heuristic's 32 x 64


def _problem(n_edges=37):
    return so2_tune.So2Problem(LMAX, CF, 4, n_edges=n_edges, n_focus=1, n_layers=2, forward=True)


@pytest.fixture
def one_tile(monkeypatch):
    """The forward key's space cut to one relay tiling (the interpreter is slow; the
    composition route's forward has tests of its own, test_so2_compose.py)."""
    monkeypatch.setattr(so2_tune, "relay_candidates", lambda lmax, cf: [TILE])
    monkeypatch.setattr(so2_tune, "compose_candidates", lambda lmax, cf: [])


def _sweep(device):
    device = torch.device(device)
    if device.type == "cuda":
        return tuning.sweep_key("so2_mixing_stack", _problem(), rounds=3, device=device)
    return tuning.sweep_key("so2_mixing_stack", _problem(), timer=FakeTimer(TILE.name), rounds=2, device="cpu")


def test_forward_keys_and_their_config_space():
    fam = so2_tune.FAMILY
    p = fam.problem_for_key("L3-C32-x4-fwd")
    assert p.forward and not p.level3 and fam.key(p) == "L3-C32-x4-fwd"
    assert fam.problem_for_key("L3-C32-x2-fwd").itemsize == 2        # 16-bit forwards have a key too
    assert not fam.problem_for_key("L3-C32-x4").forward
    for bad in ("L3-C32-x4-fwd-l3", "L3-C32-x4-l3-fwd", "L3-C32-x4-bwd"):
        with pytest.raises(ValueError, match="not a so2_mixing_stack key"):
            fam.problem_for_key(bad)
    with pytest.raises(ValueError, match="two keys"):
        so2_tune.So2Problem(3, 32, 4, level3=True, forward=True)
    relay, composed = configs.relay_candidates(3, 32), configs.compose_candidates(3, 32)
    assert fam.candidates(p) == relay + composed and fam.baseline(p) == configs.heuristic(3, 32)
    assert all(fam.change(c) == tuning.TILE for c in relay) and fam.change(composed[0]) == tuning.ROUTE
    # the forward's routes are the kernels' tilings and (float32) the composition: fused and
    # level-3 configs are not its candidates, nor the composition at a 16-bit key
    assert not fam.is_valid("L3-C32-x4-fwd", configs.fused_candidates(3, 32)[0])
    assert not fam.is_valid("L3-C32-x2-fwd", composed[0]) and fam.is_valid("L3-C32-x4-fwd", composed[0])
    assert not fam.is_valid("L3-C32-x4-fwd", configs.level3_candidates(3, 32)[0])
    assert fam.is_valid("L3-C32-x4-fwd", relay[0])
    assert fam.expected_launches(p, relay[0]) == ("so2_fwd_layer", "so2_fwd_final")
    keys = [fam.key(q) for q in fam.default_problems()]
    assert {k for k in keys if k.endswith("-fwd")} == {f"L{l}-C{c}-x4-fwd" for l, c in so2_tune.DEFAULT_SHAPES}
    both = fam.problems_from_cli("3x32", "fp32", None)
    assert [fam.key(q) for q in both] == ["L3-C32-x4", "L3-C32-x4-fwd"]
    (fwd,) = fam.problems_from_cli("3x32x1000x1", "bf16", "fwd")
    assert fam.key(fwd) == "L3-C32-x2-fwd" and fwd.n_edges == 1000 and fwd.n_focus == 1
    for empty in ("3x32x0", "3x32x1000x0"):     # a usage error, not an engagement error mid-sweep
        with pytest.raises(ValueError, match="no edges or no focus streams"):
            fam.problems_from_cli(empty, "fp32", None)
    # the baseline is a valid entry of every key (registering it pins the untuned choice)
    for key in ("L3-C32-x4", "L3-C32-x4-fwd", "L3-C32-x4-l3", "L6-C96-x2"):
        assert fam.is_valid(key, fam.baseline(fam.problem_for_key(key))), key


def test_sweep_times_the_forward_and_checks_it_bitwise(tuning_table, one_tile, device):
    result = _sweep(device)
    (cand,) = result.candidates
    assert cand.status == TIMED, cand.reason
    if torch.device(device).type == "cpu":      # the fake timer made the tiling the winner
        assert result.winner == TILE
        with tilefuse.level(2):
            assert tuning.lookup_config("so2_mixing_stack", _problem()) == TILE


def test_a_tiling_whose_forward_differs_is_rejected(tuning_table, one_tile, monkeypatch, device):
    def off_by_one_ulp(name, t, inputs):   # one element of the saved z: the backward would see it
        if name != "z_all":
            return t
        t = t.clone()
        t.view(-1)[5] = torch.nextafter(t.view(-1)[5], torch.tensor(float("inf"), device=t.device))
        return t

    perturb_so2_runs(monkeypatch, lambda choice: choice == TILE, off_by_one_ulp)
    result = _sweep(device)
    (cand,) = result.candidates
    assert cand.status == REJECTED and "z_all" in cand.reason and "1 of" in cand.reason
    assert result.winner == tuning.BASELINE


def test_the_forward_runs_its_keys_winner_at_level_2_only(tuning_table, monkeypatch, device):
    gemm = LaunchSpy(kernels.so2_gemm_kernel, "BLOCK_M")
    gate = LaunchSpy(kernels.so2_fwd_gate_kernel, "BLOCK_M")
    monkeypatch.setattr(kernels, "so2_gemm_kernel", gemm)
    monkeypatch.setattr(kernels, "so2_fwd_gate_kernel", gate)
    d, inputs = make(LMAX, 1, CF, 37, device, grad=False)
    heuristic = configs.heuristic(LMAX, CF).block_m

    def forward_tiles(level, **kw):
        gemm.seen.clear()
        gate.seen.clear()
        with tilefuse.level(level):
            x = tilefuse.so2_mixing_stack(*inputs, lmax=LMAX, focus_dim=CF, **kw)
        return x, set(gemm.seen), set(gate.seen)

    x_before, gemm_m, gate_m = forward_tiles(2)          # no entry yet: the heuristic's tiles
    assert gemm_m == {heuristic} and gate_m == {launch.GATE_BLOCK_M}     # the gate: its own launch shape
    problem = so2_tune.So2Problem(LMAX, CF, 4, n_edges=64, n_focus=1, n_layers=3, forward=True)
    tuning.register("so2_mixing_stack", {so2_tune.key_of(problem): TILE})
    x_tuned, gemm_m, gate_m = forward_tiles(2)
    assert gemm_m == {TILE.block_m} and gate_m == {launch.GATE_BLOCK_M}
    assert torch.equal(x_tuned, x_before)                # the same K order: bitwise the same x_local
    for level in (1, 3):   # level 1 never reads the table; level 3 without a variant takes the exact entry
        _, gemm_m, _ = forward_tiles(level)
        assert gemm_m == ({heuristic} if level == 1 else {TILE.block_m}), level
    # another key (lmax 2) has no forward entry: the heuristic's tiles
    d2, inputs2 = make(2, 1, CF, 37, device, grad=False)
    gemm.seen.clear()
    with tilefuse.level(2):
        tilefuse.so2_mixing_stack(*inputs2, lmax=2, focus_dim=CF)
    assert set(gemm.seen) == {configs.heuristic(2, CF).block_m}
