"""`tilefuse tune` sweeps each device's keys in a child process (runner.sweep_isolated): a key
whose candidate crashes the process aborts alone, with how it ended, and a fresh child sweeps
the keys after it (in one process the sweep would end there, or every later key fail on a
lost CUDA context).

The children import this module by name (they get the parent's import path) to unpickle its
timer."""

import ctypes

import pytest
import torch

import tilefuse
from tilefuse import tuning
from tilefuse.ops.dyt.configs import DyTProblem
from tilefuse.tuning import BASELINE, command, runner

from tuning_helpers import FakeTimer

FAST = "M32-N16-w2-p1"          # a backward-only dyt config at these keys
# where the sweeps run: the GPU on a CUDA machine (its CPU runs no kernel there), else the CPU
# in Triton's interpreter
SWEEP_DEVICE = "cuda:0" if torch.cuda.is_available() else "cpu"


class CrashingTimer(FakeTimer):
    """FakeTimer whose samples of the choice ``crash`` segfault the process."""

    def __init__(self, fast, crash):
        super().__init__(fast, 0.8)
        self.crash = crash

    def prepare(self, label, call, n_buffers):
        sample = super().prepare(label, call, n_buffers)
        return (lambda: ctypes.string_at(0)) if label == self.crash else sample


class ExitingTimer(FakeTimer):
    """FakeTimer whose process ends with status 7 at exit once it timed the choice ``fast``."""

    def prepare(self, label, call, n_buffers):
        if label == self.fast:
            import atexit
            import os
            atexit.register(os._exit, 7)
        return super().prepare(label, call, n_buffers)


@pytest.fixture
def fresh_table(monkeypatch, tmp_path):
    monkeypatch.setenv("TILEFUSE_CACHE_DIR", str(tmp_path / "cache"))
    tuning.reload()
    yield
    tuning.reload()


def test_a_key_that_crashes_its_child_aborts_alone(fresh_table):
    """The backward key's candidate segfaults while timed: that key is an error naming the
    signal and records nothing; the forward key after it is swept (in a fresh child) and
    recorded."""
    items = [("dyt", DyTProblem("bwd", 32, 16, 4, False)), ("dyt", DyTProblem("fwd", 32, 16, 4, False))]
    results, errors = runner.sweep_parallel(items, [SWEEP_DEVICE], isolate=True, timer=CrashingTimer(FAST, FAST),
                                            rounds=2, progress=False)
    assert [r.key for r in results] == ["fwd-M32-N16-x4"]
    assert len(errors) == 1 and "bwd-M32-N16-x4: aborted" in str(errors[0]) and "SIGSEGV" in str(errors[0])
    assert "prepare" in str(errors[0]) or "<lambda>" in str(errors[0])      # the frames it died in
    assert tuning.get_entry("dyt", "fwd-M32-N16-x4") == BASELINE
    assert tuning.get_entry("dyt", "bwd-M32-N16-x4") is None


def test_a_key_whose_process_ends_badly_after_its_result_records_nothing(fresh_table):
    """The child exits with status 7 after sweeping the backward key, its last: that key is
    one error and nothing is recorded for it (the children never record; this process records
    a key only after its child came through it whole). The forward key before it is
    recorded."""
    items = [("dyt", DyTProblem("fwd", 32, 16, 4, False)), ("dyt", DyTProblem("bwd", 32, 16, 4, False))]
    results, errors = runner.sweep_parallel(items, [SWEEP_DEVICE], isolate=True, timer=ExitingTimer(FAST, 0.8),
                                            rounds=2, progress=False)
    assert [r.key for r in results] == ["fwd-M32-N16-x4"]
    assert len(errors) == 1 and "bwd-M32-N16-x4: aborted" in str(errors[0]) and "status 7" in str(errors[0])
    assert tuning.get_entry("dyt", "bwd-M32-N16-x4") is None
    assert tuning.get_entry("dyt", "fwd-M32-N16-x4") == BASELINE


def test_a_dry_run_records_nothing(fresh_table):
    items = [("dyt", DyTProblem("bwd", 32, 16, 4, False))]
    results, errors = runner.sweep_parallel(items, [SWEEP_DEVICE], isolate=True, timer=FakeTimer(FAST, 0.8), rounds=2,
                                            progress=False, record=False)
    assert not errors and results[0].winner_result.name == FAST
    assert tuning.get_entry("dyt", "bwd-M32-N16-x4") is None


def test_isolated_sweeps_return_what_in_process_sweeps_do(fresh_table):
    """Without a crash: the same results and recorded winners as the in-process sweep, the
    results unpickled from the child (over two "devices", a child each)."""
    items = [("dyt", DyTProblem(p, 32, 16, 4, False)) for p in ("fwd", "bwd")]
    results, errors = runner.sweep_parallel(items, [SWEEP_DEVICE, SWEEP_DEVICE], isolate=True,
                                            timer=FakeTimer(FAST, 0.8), rounds=2, progress=False)
    assert not errors and sorted(r.key for r in results) == ["bwd-M32-N16-x4", "fwd-M32-N16-x4"]
    assert tuning.get_entry("dyt", "bwd-M32-N16-x4").name == FAST
    assert tuning.get_entry("dyt", "fwd-M32-N16-x4") == BASELINE
    bwd = next(r for r in results if r.key == "bwd-M32-N16-x4")
    assert bwd.winner_result.name == FAST and bwd.winner_result.speedup == pytest.approx(1.25)


def test_the_tune_command_isolates_unless_in_process(monkeypatch):
    seen = []
    monkeypatch.setattr(command, "sweep_parallel", lambda items, devices, **kw: seen.append(kw["isolate"]) or ([], []))
    monkeypatch.setattr(command, "_gpu_missing", lambda devices: None)
    for extra in ([], ["--in-process"]):
        assert command.main(["--op", "dyt", "--shape", "64x32", "--pass", "fwd", "--force", "--no-progress",
                             *extra]) == 0
    assert seen == [True, False]
    with pytest.raises(SystemExit):
        command.main(["--show", "--in-process"])       # it sweeps nothing


def test_tune_model_isolated_aborts_only_the_crashing_key(fresh_table):
    """tilefuse.tune(model, isolate=True): the model runs here, its keys are swept in a child;
    the backward key's candidate segfaults there, so that key alone aborts (SweepError naming
    the signal, nothing recorded) and this process goes on; the forward key is recorded."""
    model = tilefuse.nn.DyT(16).to(SWEEP_DEVICE)
    with pytest.raises(tuning.SweepError) as raised:
        tilefuse.tune(model, torch.randn(2, 16, 16, device=SWEEP_DEVICE), device=SWEEP_DEVICE,
                      timer=CrashingTimer(FAST, FAST), rounds=2, progress=False, isolate=True)
    assert "bwd-M32-N16-x4: aborted" in str(raised.value) and "SIGSEGV" in str(raised.value)
    assert "fwd-M32-N16-x4" not in str(raised.value)
    assert tuning.get_entry("dyt", "fwd-M32-N16-x4") == BASELINE
    assert tuning.get_entry("dyt", "bwd-M32-N16-x4") is None


def test_tune_model_isolated_returns_what_in_process_does(fresh_table):
    model = tilefuse.nn.DyT(16).to(SWEEP_DEVICE)
    results = tilefuse.tune(model, torch.randn(2, 16, 16, device=SWEEP_DEVICE), device=SWEEP_DEVICE,
                            timer=FakeTimer(FAST, 0.8), rounds=2, progress=False, isolate=True)
    assert sorted(r.key for r in results) == ["bwd-M32-N16-x4", "fwd-M32-N16-x4"]
    assert tuning.get_entry("dyt", "bwd-M32-N16-x4").name == FAST
    assert tuning.get_entry("dyt", "fwd-M32-N16-x4") == BASELINE


def test_tune_model_isolated_refuses_a_timer_it_cannot_send(fresh_table):
    """A timer that does not pickle cannot reach the child: TypeError naming it, before the
    model runs; a non-bool isolate is refused by name too."""
    calls = []

    class LocalTimer(FakeTimer):   # defined in a function: pickle cannot find it by name
        pass

    def model(x):
        calls.append(1)
        return tilefuse.dyt(x, torch.tensor([0.5]), torch.ones(16))

    with pytest.raises(TypeError, match="timer must be picklable"):
        tilefuse.tune(model, torch.randn(2, 16, 16), timer=LocalTimer(FAST, 0.8), progress=False, isolate=True)
    with pytest.raises(TypeError, match="isolate must be a bool"):
        tilefuse.tune(model, torch.randn(2, 16, 16), progress=False, isolate="True")
    assert not calls


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_isolated_gpu_sweep_records_a_winner(fresh_table):
    """On a GPU, a real sweep (CUDA timer) through the child records the key."""
    results, errors = runner.sweep_parallel([("dyt", DyTProblem("fwd", 4096, 256, 4, False))], ["cuda:0"],
                                            isolate=True, rounds=2, progress=False)
    assert not errors and [r.key for r in results] == ["fwd-M4096-N256-x4"]
    assert tuning.get_entry("dyt", "fwd-M4096-N256-x4") is not None


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_tune_model_isolated_on_a_gpu_records_its_keys(fresh_table):
    """tilefuse.tune(model, isolate=True) on a GPU: the model's two dyt keys swept in the child
    (CUDA timer) and recorded here."""
    model = tilefuse.nn.DyT(256).cuda()
    results = tilefuse.tune(model, torch.randn(16, 256, 256, device="cuda"), rounds=2, progress=False, isolate=True)
    assert sorted(r.key for r in results) == ["bwd-M4096-N256-x4", "fwd-M4096-N256-x4"]
    assert all(tuning.get_entry("dyt", key) is not None for key in ("bwd-M4096-N256-x4", "fwd-M4096-N256-x4"))


def test_tune_model_isolated_refuses_a_timer_from_the_running_script(fresh_table, monkeypatch):
    """A timer class the running script defines (its module __main__) pickles here but cannot
    be unpickled by the child, a ``python -c`` process: TypeError before the model runs (not
    every key aborting after it)."""
    import sys

    class MainTimer(FakeTimer):
        pass
    MainTimer.__module__, MainTimer.__qualname__ = "__main__", "MainTimer"
    monkeypatch.setattr(sys.modules["__main__"], "MainTimer", MainTimer, raising=False)
    calls = []

    def model(x):
        calls.append(1)
        return x
    with pytest.raises(TypeError, match="refers to __main__"):
        tilefuse.tune(model, torch.randn(4), timer=MainTimer(FAST, 0.8), progress=False, isolate=True)
    assert not calls


def test_tune_model_isolated_sends_the_device_with_its_index(monkeypatch):
    """The child is a fresh process: "cuda" or no device there would be its own current device
    (cuda:0), not the caller's. The parent resolves the index (here a faked current device 1)."""
    from tilefuse.tuning import model as tune_model
    sent = []
    monkeypatch.setattr(runner, "_sweep_shard",
                        lambda device, shard, position, options: sent.append([device]) or ([], []))
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 1)
    options = dict(timer=None, rounds=2, record=False, progress=False)
    key = [("dyt", DyTProblem("fwd", 32, 16, 4, False))]
    tune_model._sweep(key, {**options, "device": "cuda"}, True)
    tune_model._sweep(key, {**options, "device": torch.device("cuda", 3)}, True)
    tune_model._sweep(key, {**options, "device": "cpu"}, True)
    monkeypatch.setattr(tune_model, "default_device", lambda: torch.device("cuda", 1))
    tune_model._sweep(key, {**options, "device": None}, True)
    assert sent == [["cuda:1"], ["cuda:3"], ["cpu"], ["cuda:1"]]
