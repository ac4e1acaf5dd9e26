"""The checks that benchmarks/ programs run before they time anything: a provider with a wrong
answer, or one that leaves output rows unwritten (NaN under the poisoned allocations), fails
and is not timed; speedups are the medians of per-round ratios, with the samples recorded.

Only plain-PyTorch providers run here (no kernels, no interpreter): what is under test is the
programs' checking and bookkeeping, not the ops."""

import json
import statistics

import pytest
import torch

from tilefuse.tuning import timing

from benchmark_helpers import load_benchmark


def unwritten_rows(y):
    """y with its second half of rows a fresh allocation that nothing writes."""
    half = y.shape[0] // 2
    return torch.cat([y[:half], torch.empty_like(y[half:])])


@pytest.fixture(scope="module")
def grouped():
    return load_benchmark("grouped_compose_gpu_check")


def broken_runs(program, activation="swiglu"):
    """The eager composition as it is, with a wrong y, and with rows of y never written."""
    eager = program.provider_runs(activation, names=["eager composition"])["eager composition"]

    def scaled(i, interleave, leaves):
        y, grads = eager(i, interleave, leaves)
        return y * 1.5, grads

    def unwritten(i, interleave, leaves):
        y, grads = eager(i, interleave, leaves)
        return unwritten_rows(y), grads
    return {"eager composition": eager, "scaled": scaled, "unwritten": unwritten}


def test_grouped_check_key_fails_a_wrong_provider_and_one_that_leaves_rows_unwritten(grouped, capsys):
    runs = broken_runs(grouped, "geglu")
    failed = grouped.check_key(4, 64, 128, 128, 32, "geglu", True, runs, 7, "compose route")
    assert set(failed) == {"scaled", "unwritten"}, failed
    assert failed["scaled"].startswith("y error 5.0") and failed["unwritten"].startswith("y error nan")
    assert "PASS eager composition" in capsys.readouterr().out


def test_grouped_check_key_fails_tilefuse_on_another_route_than_the_timed_one(grouped):
    # The plain composition launches no tilefuse kernel: right values, not the route timed.
    runs = {"tilefuse": grouped.provider_runs(names=["eager composition"])["eager composition"]}
    failed = grouped.check_key(4, 64, 128, 128, None, "swiglu", False, runs, 7, "compose route")
    assert "did not run the timed inputs' route, compose route" in failed["tilefuse"]


def test_grouped_time_key_times_only_the_providers_that_pass(grouped, monkeypatch, capsys):
    monkeypatch.setattr(grouped, "path_taken", lambda *a, **k: "compose route")
    runs = broken_runs(grouped)
    monkeypatch.setattr(grouped, "provider_runs", lambda *a, **k: runs)
    i = grouped.random_inputs([16] * 4, 128, 128, torch.bfloat16, bias=False, device="cpu",
                              generator=torch.Generator().manual_seed(0))
    assert grouped.time_key(1, 4, 64, 128, 128, i, 32, "swiglu", False, 2, grouped.PROVIDERS) is False
    lines = capsys.readouterr().out.splitlines()
    timed = [line.split()[0] for line in lines if " ms [" in line]
    assert timed == ["eager"], lines
    assert sum("FAILED its check, not timed" in line for line in lines) == 2


@pytest.fixture(scope="module")
def so2():
    return load_benchmark("so2_peers")


def with_peer(program, monkeypatch, name, kind, fix=lambda x: x):
    """build_peers with one more peer: the eager reference with ``fix`` applied to x."""
    original = program.build_peers

    def build_peers(args, lmax, cf, *rest):
        peers, facts = original(args, lmax, cf, *rest)
        ref = program._reference_fn(lmax, cf)
        peers.append(program.Peer(name, kind, lambda inp: (lambda: fix(ref(*inp.args())))))
        return peers, facts
    monkeypatch.setattr(program, "build_peers", build_peers)


def test_so2_peers_check_fails_a_peer_that_leaves_rows_unwritten(so2, monkeypatch, tmp_path):
    with_peer(so2, monkeypatch, "rows unwritten", "eager", unwritten_rows)
    out = tmp_path / "p.json"
    assert so2.main(["--tiny", "--peers", "eager", "--shapes", "16:1:32", "--rounds", "1", "--json", str(out)]) == 0
    rows = {r["peer"]: r for r in json.loads(out.read_text())["results"][0]["peers"]}
    assert rows["rows unwritten"]["status"] == "not equivalent"
    assert rows["rows unwritten"]["f64_errors"]["x"] == "nan" and "ms" not in rows["rows unwritten"]
    assert rows["eager reference"]["status"] == "ok"


def test_so2_peers_speedups_are_medians_of_per_round_ratios(so2, monkeypatch, tmp_path):
    with_peer(so2, monkeypatch, "deepmd fp32 [stand-in]", "deepmd")
    # Per-round ratios deepmd / eager 0.5, 2, 2: median 2, where the medians' ratio is 1.
    samples = {"eager reference": (2.0, 1.0, 5.0), "deepmd fp32 [stand-in]": (1.0, 2.0, 10.0)}

    def interleaved(steps, rounds, **kw):
        return {n: timing.Timing(statistics.median(samples[n]), min(samples[n]), max(samples[n]), rounds,
                                 samples[n]) for n in steps}
    monkeypatch.setattr(so2.timing, "interleaved", interleaved)
    out = tmp_path / "p.json"
    assert so2.main(["--tiny", "--peers", "eager", "--shapes", "16:1:32", "--json", str(out)]) == 0
    result = json.loads(out.read_text())["results"][0]
    rows = {r["peer"]: r for r in result["peers"]}
    assert result["facts"]["x_deepmd_fp32_base"] == "deepmd fp32 [stand-in]"
    assert rows["eager reference"]["x_deepmd_fp32"] == 2.0
    assert rows["eager reference"]["samples_ms"] == [2.0, 1.0, 5.0]
    assert rows["deepmd fp32 [stand-in]"]["x_deepmd_fp32"] == 1.0


def test_expert_parallel_stops_the_run_on_one_rank_s_failure(monkeypatch, capsys):
    """A provider failing on one rank ends that rank's process (SystemExit, which the
    interleaving does not catch), so the launcher stops the others: dropped on that rank alone,
    it left the other ranks waiting in its collectives for good (a 2-rank gloo run hung until
    killed). The other providers' samples before it are unaffected."""
    program = load_benchmark("expert_parallel")
    monkeypatch.setattr(program, "barrier", lambda device: None)
    monkeypatch.setattr(program.dist, "get_rank", lambda: 1)
    timer = program.RankTimer(timing.WallTimer(warmup=1), torch.device("cpu"))
    calls = []

    def failing():
        calls.append(1)
        if len(calls) == 3:   # warm-up, a first sample, then the failure
            raise RuntimeError("CUDA out of memory (simulated)")
    with pytest.raises(SystemExit, match=r"rank 1: a sample of ep raised RuntimeError: CUDA out of memory"):
        timing.interleaved({"one": lambda: None, "ep": failing}, rounds=4, timer=timer)
    assert "Traceback" in capsys.readouterr().err
    warm_up_fails = program.RankTimer(timing.WallTimer(warmup=1), torch.device("cpu"))
    with pytest.raises(SystemExit, match="rank 1: ep's warm-up raised ValueError"):
        timing.interleaved({"ep": lambda: int("x")}, rounds=2, timer=warm_up_fails)


def test_expert_parallel_checks_its_module_against_one_holding_every_expert():
    """expert_parallel.py checks, before timing, that the expert-parallel module gives this
    rank's tokens what one module holding every expert gives them (sorted by expert, put back),
    forward and the gradients of x and probs: a right result passes, a scaled or misrouted
    one, or one whose backward alone is wrong, raises before anything is timed."""
    program = load_benchmark("expert_parallel")
    from tilefuse.nn import GroupedGLUMLP
    torch.manual_seed(0)
    E, H, F = 4, 32, 32
    full = GroupedGLUMLP(E, H, F, dtype=torch.bfloat16)
    x = torch.randn(10, H, dtype=torch.bfloat16)
    ids = torch.tensor([3, 0, 0, 2, 3, 1, 1, 0, 2, 3])
    probs = torch.rand(10) + 0.1
    dy = torch.randn(10, H, dtype=torch.bfloat16)

    def right(x, ids, probs):
        order = torch.argsort(ids, stable=True)
        out = torch.empty_like(x)
        out[order] = full(x[order], torch.bincount(ids, minlength=E), probs[order])
        return out

    class TwiceTheGradient(torch.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            return t.clone()

        @staticmethod
        def backward(ctx, g):
            return 2 * g
    program.check_equivalent(right, full, x, ids, probs, E, dy)
    wrongs = [("y", lambda x, i, p: right(x, i, p) * 1.5), ("y", lambda x, i, p: right(x, (i + 1) % E, p)),
              ("dx", lambda x, i, p: right(TwiceTheGradient.apply(x), i, p)),
              ("dprobs", lambda x, i, p: right(x, i, TwiceTheGradient.apply(p)))]
    for name, wrong in wrongs:
        with pytest.raises(RuntimeError, match=f"expert parallel's {name} differs from one module's on the same"):
            program.check_equivalent(wrong, full, x, ids, probs, E, dy)
