"""The sweep protocol with a fake family (fake launcher) and a fake timer: failures, checks,
engagement, interleaving, margins and ties. No GPU and no Triton needed."""

import contextlib
import dataclasses
import re

import pytest
import torch

import tilefuse
from tilefuse import launches, policy, tuning
from tilefuse.tuning import BASELINE, ROUTE, TILE, EngagementError, SweepError, TuningFamily, store
from tilefuse.tuning.sweep import REJECTED, SKIPPED, TIMED


@dataclasses.dataclass(frozen=True)
class Problem:
    n: int
    size: int = 0      # not in the key: what a family's sweep_problem may change


@dataclasses.dataclass(frozen=True)
class Config:
    tile: int
    route: bool = False

    @property
    def name(self):
        return f"t{self.tile}" + ("-route" if self.route else "")


BASE = Config(64)


class FakeFamily(TuningFamily):
    """A launcher that doubles its input, with per-config misbehaviour on demand."""

    name = "fake"
    source_files = ()

    def __init__(self, candidates, behaviour=None):
        self._candidates = candidates
        self.behaviour = behaviour or {}    # config name -> what goes wrong
        self.calls = {}

    def key(self, problem):
        return f"n{problem.n}"

    def problem_for_key(self, key):
        if not (isinstance(key, str) and key.startswith("n") and key[1:].isdigit()):
            raise ValueError(f"not a fake key: {key!r}")
        return Problem(int(key[1:]))

    def config_from_dict(self, d):
        return Config(**d)

    def config_to_dict(self, config):
        return dataclasses.asdict(config)

    def is_valid(self, key, config):
        return True

    def baseline(self, problem):
        return BASE

    def candidates(self, problem):
        return list(self._candidates)

    def change(self, config):
        return ROUTE if config.route else TILE

    def complexity(self, config):
        return (config.route, config.tile)

    def make_inputs(self, problem, device, seed):
        return torch.randn(problem.n, generator=torch.Generator().manual_seed(seed))

    def input_bytes(self, problem):
        return 4 * problem.n

    def run(self, problem, choice, inputs):
        what = self.behaviour.get(choice.name)
        self.calls[choice.name] = calls = self.calls.get(choice.name, 0) + 1
        y = torch.empty_like(inputs)
        if what == "raise" or (what == "raise-when-timed" and calls > 1):
            raise AssertionError(f"index bug in {choice.name}")
        if isinstance(what, BaseException):
            raise what
        if what == "hole":
            y[1:] = inputs[1:] * 2          # element 0 never written
        else:
            y.copy_(inputs * 2 + (1e-6 if what == "wrong" else 0.0))
        if what != "silent" and not (what == "guard" and policy.get_level() < 2):
            launches.record("fake_kernel")
        return {"y": y}

    def expected_launches(self, problem, choice):
        return ("fake_kernel",)

    def compare(self, problem, inputs, got, want):
        return [] if torch.equal(got["y"], want["y"]) else ["y: not bitwise equal"]

    def default_problems(self):
        return [Problem(8)]

    def problems_from_cli(self, shape, dtype, pass_):
        return [Problem(int(shape))]


class FakeTimer:
    """Seconds per call by label; a list gives one value per round; an exception in their
    place is raised by that sample. Records the order."""

    def __init__(self, times):
        self.times = times
        self.order = []

    def buffers(self, input_bytes):
        return 2

    def prepare(self, label, call, n_buffers):
        name = "baseline" if label.startswith("baseline") else label

        def sample():
            t = self.times[name]
            value = t[sum(1 for o in self.order if o == name)] if isinstance(t, list) else t
            self.order.append(name)
            if isinstance(value, Exception):
                raise value
            return value
        return sample


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEFUSE_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("TRITON_INTERPRET", "1")     # kernels "can run" on the CPU
    # The sweeps here run on device="cpu" and record into the CPU's table; lookups must read
    # that table on a CUDA machine too (there they would default to the current GPU's).
    monkeypatch.setattr(tuning.table, "_device_index", lambda: -1)
    tuning.reload()
    yield
    tuning.unregister_family("fake")
    tuning.reload()


def family(candidates, behaviour=None):
    fam = FakeFamily(candidates, behaviour)
    tuning.unregister_family("fake")
    tuning.register_family(fam)
    return fam


def sweep(times, rounds=5, **kw):
    timer = FakeTimer(times)
    return tuning.sweep_key("fake", Problem(16), timer=timer, rounds=rounds, device="cpu", **kw), timer


def test_winner_is_recorded_and_served():
    family([Config(16), Config(32)])
    result, _ = sweep({"baseline": 1.0, "t16": 0.8, "t32": 0.95})
    assert result.winner == Config(16) and result.key == "n16"
    assert result.winner_result.speedup == pytest.approx(1.25)
    assert tuning.lookup_config("fake", Problem(16)) == Config(16)
    measured = store.load(tuning.table_location()[1], tuning.table_location()[0])["fake"]["n16"].measured
    assert measured["speedup"] == 1.25 and measured["timed"] == 2 and measured["rejected"] == 0


@pytest.mark.parametrize("where", ["under-a-file", "a-file"])
def test_an_unwritable_table_is_a_key_error_before_any_timing_and_the_run_goes_on(tmp_path, monkeypatch, where):
    """A cache folder that cannot hold a table (TILEFUSE_CACHE_DIR naming a regular file, or a
    folder under one) makes the key a SweepError naming the variable before anything is timed
    (found when the result was recorded, it cost every key's whole sweep); sweep_each collects
    it and goes on with the next key. Without recording, the sweep runs."""
    from tilefuse.tuning import runner
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    setting = str(blocker / "cache") if where == "under-a-file" else str(blocker)
    monkeypatch.setenv("TILEFUSE_CACHE_DIR", setting)
    tuning.reload()
    family([Config(16), Config(32)])
    with pytest.warns(tuning.TableWarning, match="cannot be opened"), \
            pytest.raises(SweepError, match=r"fake: the tuning table's folder .* cannot hold a table file .*"
                                            + re.escape(f"TILEFUSE_CACHE_DIR={setting!r}") + ".*nothing swept"):
        sweep({"baseline": 1.0, "t16": 0.8, "t32": 0.95})
    timer = FakeTimer({"baseline": 1.0, "t16": 0.8, "t32": 0.95})
    results, errors = runner.sweep_each([("fake", Problem(16)), ("fake", Problem(32))], device="cpu", timer=timer,
                                        rounds=2, progress=False)
    assert results == [] and len(errors) == 2 and all("cannot hold a table file" in str(e) for e in errors)
    assert timer.order == []   # nothing timed
    result = tuning.sweep_key("fake", Problem(16), timer=timer, rounds=2, device="cpu", record=False)
    assert result.winner == Config(16) and timer.order


@pytest.mark.parametrize("when", ["raise", "raise-when-timed"])
def test_non_resource_exception_aborts_the_key_and_records_nothing(when):
    family([Config(16), Config(32), Config(128)], {"t32": when})
    with pytest.raises(SweepError, match=r"n16: t32 raised AssertionError: index bug in t32.*nothing recorded"):
        sweep({"baseline": 1.0, "t16": 2.0, "t32": 2.0, "t128": 2.0})
    assert not tuning.is_covered("fake", "n16")      # never "baseline won"
    assert not tuning.table_location()[1].exists()


@pytest.mark.parametrize("error", [
    torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"),
    RuntimeError("Triton Error [CUDA]: out of resource: too many resources requested for launch"),
    pytest.param("triton", id="triton-OutOfResources"),
], ids=["cuda-oom", "launch-out-of-resource", "triton"])
def test_resource_error_skips_only_that_candidate(error):
    if error == "triton":
        from triton.runtime.errors import OutOfResources
        error = OutOfResources(262144, 232448, "shared memory")
    family([Config(16), Config(32), Config(128)], {"t32": error})
    result, timer = sweep({"baseline": 1.0, "t16": 0.9, "t32": 0.5, "t128": 1.0})
    assert [c.name for c in result.with_status(SKIPPED)] == ["t32"]
    assert type(error).__name__ in result.with_status(SKIPPED)[0].reason
    assert {c.name for c in result.with_status(TIMED)} == {"t16", "t128"} and "t32" not in timer.order
    assert result.winner == Config(16) and tuning.is_covered("fake", "n16")
    assert result.entry()["measured"]["skipped"] == 1


@pytest.mark.parametrize("where", ["candidates", "baseline", "describe"])
def test_an_error_in_the_familys_own_code_aborts_only_its_key(where, monkeypatch):
    """An exception from the family's code outside a candidate's guarded steps (its candidate
    list, baseline, names) aborts that key as a SweepError naming it; sweep_each records it
    and sweeps the next key."""
    from tilefuse.tuning import runner
    fam = family([Config(32)])
    original = getattr(FakeFamily, where)

    def broken(self, arg):
        if getattr(arg, "n", None) == 16:
            raise ValueError(f"bug in the family's {where}")
        return original(self, arg)
    if where == "describe":   # describe takes a config: break the candidate's name
        def broken(self, config):
            if config == Config(32):
                raise ValueError("bug in the family's describe")
            return original(self, config)
        fam.candidates = lambda problem: [Config(32)] if problem.n == 16 else [Config(64)]
    monkeypatch.setattr(FakeFamily, where, broken)
    timer = FakeTimer({"baseline": 1.0, "t32": 0.5, "t64": 0.5})
    results, errors = runner.sweep_each([("fake", Problem(16)), ("fake", Problem(8))], device="cpu", timer=timer,
                                        rounds=2, progress=False)
    assert [r.key for r in results] == ["n8"] and tuning.is_covered("fake", "n8")
    assert len(errors) == 1 and isinstance(errors[0], SweepError)
    assert f"fake n16: the sweep raised ValueError: bug in the family's {where}" in str(errors[0])
    assert "nothing recorded" in str(errors[0]) and not tuning.is_covered("fake", "n16")


def test_a_compile_error_quoting_a_comment_about_registers_aborts_the_key():
    """Triton's CompilationError (a kernel that does not compile: a bug) quotes the kernel's
    source lines, whose comments may say "registers" or "shared memory": it is a bug, not a
    resource error, so the key aborts (a skipped candidate could record "baseline won")."""
    import ast
    from triton.compiler.errors import CompilationError
    src = "def kernel(x_ptr):\n    # the partial sums stay in registers (shared memory is full)\n    y = bad\n"
    error = CompilationError(src, ast.parse(src).body[0].body[0], "Shape element 1 must be a power of 2")
    assert "registers" in str(error) and "shared memory" in str(error)
    family([Config(16), Config(32), Config(128)], {"t32": error})
    with pytest.raises(SweepError, match=r"(?s)n16: t32 raised CompilationError.*nothing recorded"):
        sweep({"baseline": 1.0, "t16": 2.0, "t32": 2.0, "t128": 2.0})
    assert not tuning.is_covered("fake", "n16")


def test_resource_error_in_the_baseline_aborts():
    family([Config(16)], {"t64": torch.OutOfMemoryError("out of memory")})
    with pytest.raises(SweepError, match="baseline raised OutOfMemoryError"):
        sweep({"baseline": 1.0, "t16": 0.5})
    assert not tuning.is_covered("fake", "n16")


@pytest.mark.parametrize("fit", [0, 1], ids=["none-fits", "one-of-two-fits"])
def test_timing_inputs_that_do_not_fit(fit, monkeypatch):
    """The timing inputs come after the checks (seeds from len(candidates) on): with room for
    one of the timer's two sets the sweep times on one; with room for none the key aborts as a
    SweepError, and sweep_each goes on to the next key, instead of an uncaught OutOfMemoryError
    ending the whole tune (a 6x128 so2 key on an 80 GB H100 did that)."""
    from tilefuse.tuning import runner
    fam = family([Config(16)])
    make = fam.make_inputs
    made = []

    def make_inputs(problem, device, seed):
        if problem.n == 16 and seed >= 1 + fit:     # seed 0: the check; 1, 2: the timer's two sets
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 9.50 GiB")
        made.append(seed)
        return make(problem, device, seed)

    monkeypatch.setattr(fam, "make_inputs", make_inputs)
    if fit:
        result, timer = sweep({"baseline": 1.0, "t16": 0.5})
        assert result.winner == Config(16) and made == [0, 1] and tuning.is_covered("fake", "n16")
        return
    with pytest.raises(SweepError, match="n16: making the timing inputs raised OutOfMemoryError.*nothing recorded"):
        sweep({"baseline": 1.0, "t16": 0.5})
    assert not tuning.is_covered("fake", "n16")
    timer = FakeTimer({"baseline": 1.0, "t16": 0.5})
    results, errors = runner.sweep_each([("fake", Problem(16)), ("fake", Problem(32))], device="cpu", timer=timer,
                                        rounds=2, progress=False)
    assert [r.key for r in results] == ["n32"] and len(errors) == 1 and "n16" in str(errors[0])
    assert errors[0].__traceback__ is None and errors[0].__cause__.__traceback__ is None   # frames freed


@pytest.fixture
def two_gpus(monkeypatch):
    """Two CUDA devices of different models faked on the CPU, device 0 current: the current
    device (torch.cuda.current_device, torch.cuda.device blocks), the table lookups read (the
    current one's) and a fingerprint per device, so each has a table of its own. Yields the
    one-element list holding the current index."""
    current = [0]

    @contextlib.contextmanager
    def device(d):
        before, current[0] = current[0], torch.device(d).index
        try:
            yield
        finally:
            current[0] = before

    cpu = store.fingerprint(-1)
    monkeypatch.setattr(store, "fingerprint", lambda index: {**cpu, "gpu": f"fake gpu {index}"})
    monkeypatch.setattr(tuning.table, "_has_cuda", lambda: True)
    monkeypatch.setattr(tuning.table, "_device_index", lambda: current[0])
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: current[0])
    monkeypatch.setattr(torch.cuda, "device", device)
    tuning.reload()
    yield current


def test_a_sweep_on_another_cuda_device_runs_with_that_device_current(two_gpus, monkeypatch):
    """sweep_key(device="cuda:1") while device 0 is current: every run of the candidates'
    checks and warm-ups happens with device 1 current (the launchers launch on the current
    device), device 0 is current again afterwards, and the result is in device 1's table."""
    fam = family([Config(16), Config(32)])
    run, ran_on = fam.run, []
    monkeypatch.setattr(fam, "run", lambda p, c, x: ran_on.append(torch.cuda.current_device()) or run(p, c, x))
    timer = FakeTimer({"baseline": 1.0, "t16": 0.8, "t32": 1.0})
    result = tuning.sweep_key("fake", Problem(16), device="cuda:1", timer=timer, rounds=2)
    # two checks of two runs each, three warm-ups over the timer's two input sets
    assert result.winner == Config(16) and len(ran_on) == 10 and set(ran_on) == {1}
    assert two_gpus == [0] and not tuning.is_covered("fake", "n16")
    two_gpus[0] = 1
    assert tuning.lookup_config("fake", Problem(16)) == Config(16)


def test_covered_keys_are_read_from_the_sweep_devices_table(two_gpus, monkeypatch):
    """`tilefuse tune --devices 1` and tune(model, device="cuda:1") skip the keys device 1's
    table covers, not those of the current device (0): a sweep records into its device's table."""
    from tilefuse.tuning import command
    from tilefuse.tuning import model as tune_model
    family([Config(16)])
    tuning.table.record("fake", {"n16": {"winner": BASELINE}}, 1)    # covered on device 1 only
    tuning.table.record("fake", {"n32": {"winner": BASELINE}}, 0)    # covered on device 0 only
    swept = []
    monkeypatch.setattr(command, "_gpu_missing", lambda devices: None)
    monkeypatch.setattr(command, "sweep_parallel", lambda items, devices, **kw: swept.append(items) or ([], []))
    monkeypatch.setattr(tune_model, "sweep_each", lambda items, **kw: swept.append(items) or ([], []))
    assert command.main(["--op", "fake", "--shape", "16", "--shape", "32", "--devices", "1", "--no-progress"]) == 0

    def uses_both_keys(x):
        for n in (16, 32):
            tuning.lookup_config("fake", Problem(n))
        return x

    assert tuning.tune(uses_both_keys, torch.ones(1), device="cuda:1", progress=False) == []
    assert [[p.n for _, p in items] for items in swept] == [[32], [32]]


OOM = torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")


def test_a_resource_error_in_a_timed_round_skips_only_that_candidate():
    """A sample that runs out of memory in the timed rounds (the checks and warm-ups passed)
    skips that candidate as a resource error in its check would: it is sampled no more, the
    others are timed over every round and the key is recorded; sweep_each goes on."""
    from tilefuse.tuning import runner
    family([Config(16), Config(32), Config(128)])
    result, timer = sweep({"baseline": 1.0, "t16": 0.9, "t32": [0.5, OOM], "t128": 1.0}, rounds=5)
    assert [c.name for c in result.with_status(SKIPPED)] == ["t32"]
    assert result.with_status(SKIPPED)[0].reason.startswith("OutOfMemoryError: CUDA out of memory")
    assert timer.order.count("t32") == 2 and timer.order.count("t16") == 5
    assert {c.name for c in result.with_status(TIMED)} == {"t16", "t128"} and result.winner == Config(16)
    assert tuning.is_covered("fake", "n16") and result.entry()["measured"]["skipped"] == 1
    timer = FakeTimer({"baseline": 1.0, "t16": 0.9, "t32": OOM, "t128": 1.0})
    results, errors = runner.sweep_each([("fake", Problem(16)), ("fake", Problem(32))], device="cpu", timer=timer,
                                        rounds=2, record=False, progress=False)
    assert errors == [] and [r.key for r in results] == ["n16", "n32"]


@pytest.mark.parametrize("times,name,error", [
    ({"t32": [0.5, AssertionError("index bug in t32")]}, "t32", "AssertionError: index bug in t32"),
    ({"baseline": [1.0, OOM]}, "baseline t64", "OutOfMemoryError"),
], ids=["candidate-bug", "baseline-oom"])
def test_any_other_error_in_a_timed_round_aborts_the_key_naming_the_choice(times, name, error):
    """A timed sample that raises anything but a candidate's resource error aborts the key as a
    SweepError naming the choice, records nothing, and sweep_each goes on to the next key."""
    from tilefuse.tuning import runner
    family([Config(16), Config(32)])
    times = {"baseline": 1.0, "t16": 0.9, "t32": 0.8, **times}
    with pytest.raises(SweepError, match=f"n16: {name} raised {error}.*nothing recorded"):
        sweep(times, rounds=3)
    assert not tuning.is_covered("fake", "n16")
    times[name.split()[0]] = times[name.split()[0]][1]     # raises in every key's first round
    results, errors = runner.sweep_each([("fake", Problem(16)), ("fake", Problem(32))], device="cpu",
                                        timer=FakeTimer(times), rounds=2, progress=False)
    assert results == [] and [str(e).split(":")[0] for e in errors] == ["fake n16", "fake n32"]
    assert not tuning.is_covered("fake", "n32")


@pytest.mark.parametrize("rounds,error", [(0, ValueError), (-3, ValueError), (True, TypeError), (2.5, TypeError),
                                          ("3", TypeError)])
def test_rounds_is_checked_before_any_work(rounds, error):
    """sweep_key and tune(model) name a ``rounds`` that is not an int >= 1 before anything runs
    (bool is not an int here)."""
    fam = family([Config(16)])
    with pytest.raises(error, match="sweep_key: rounds must be"):
        sweep({"baseline": 1.0, "t16": 0.5}, rounds=rounds)
    ran = []
    with pytest.raises(error, match="tune: rounds must be"):
        tuning.tune(lambda x: ran.append(x), torch.ones(1), rounds=rounds, device="cpu", timer=FakeTimer({}),
                    progress=False)
    assert fam.calls == {} and ran == []


@pytest.mark.parametrize("flag", ["record", "progress", "force"])
@pytest.mark.parametrize("value", ["False", 0, None])
def test_the_on_off_arguments_are_checked_before_any_work(flag, value):
    """sweep_key and tune(model) name a record / progress / force that is not a bool before
    anything runs: record="False" is truthy and would have written the table file."""
    fam = family([Config(16)])
    if flag != "force":
        with pytest.raises(TypeError, match=f"sweep_key: {flag} must be a bool"):
            sweep({"baseline": 1.0, "t16": 0.5}, **{flag: value})
    ran = []
    kwargs = {"progress": False, flag: value}
    with pytest.raises(TypeError, match=f"tune: {flag} must be a bool"):
        tuning.tune(lambda x: ran.append(x), torch.ones(1), device="cpu", timer=FakeTimer({}), **kwargs)
    with pytest.raises(TypeError, match="tune: model must be callable"):
        tuning.tune(None, torch.ones(1), device="cpu", timer=FakeTimer({}), progress=False)
    assert fam.calls == {} and ran == [] and not tuning.is_covered("fake", "n16")


def test_a_smaller_sweep_problem_is_swept_and_recorded_and_one_with_another_key_refused(monkeypatch):
    """A family's sweep_problem may hand the sweep a problem of the same key (a size the key
    does not depend on): that problem is the one made and run, and the entry records it; one
    whose key differs is refused before anything runs."""
    fam = family([Config(16)])
    seen = []
    make = fam.make_inputs
    monkeypatch.setattr(fam, "make_inputs", lambda p, d, seed: seen.append(p) or make(p, d, seed))
    monkeypatch.setattr(fam, "sweep_problem", lambda p, d: dataclasses.replace(p, size=1))
    result, _ = sweep({"baseline": 1.0, "t16": 0.5})
    assert result.key == "n16" and set(seen) == {Problem(16, 1)}
    measured = store.load(tuning.table_location()[1], tuning.table_location()[0])["fake"]["n16"].measured
    assert measured["sweep_problem"] == repr(Problem(16, 1))
    monkeypatch.setattr(fam, "sweep_problem", lambda p, d: Problem(8))
    seen.clear()
    with pytest.raises(SweepError, match=r"sweep_problem made .*whose key differs \('n8', not 'n16'\)"):
        sweep({"baseline": 1.0, "t16": 0.5})
    assert seen == []


def test_candidates_are_checked_on_the_familys_check_problem_and_timed_on_the_swept_one(monkeypatch):
    """A family's check_problem (a size of the key that leaves partial last tiles) is the one
    the correctness check makes and runs, for the baseline and every candidate; timing makes
    and runs the swept problem. A candidate wrong only at the check problem's size is rejected
    (before, the check ran the key's power-of-two size, whose tiles are all full, and such a
    candidate could win); one whose key differs is refused before anything runs."""
    fam = family([Config(16), Config(32)])
    made, ran = [], []
    make, run = fam.make_inputs, fam.run
    monkeypatch.setattr(fam, "make_inputs", lambda p, d, seed: made.append(p) or make(p, d, seed))

    def partial_tile_bug(p, choice, inputs):
        ran.append(p)
        out = run(p, choice, inputs)
        if choice == Config(32) and p.size == 1:   # only at the check problem's size
            out["y"][-1] += 1.0
        return out
    monkeypatch.setattr(fam, "run", partial_tile_bug)
    monkeypatch.setattr(fam, "check_problem", lambda p: dataclasses.replace(p, size=1))
    result, timer = sweep({"baseline": 1.0, "t16": 0.9, "t32": 0.5})
    checked, timed = Problem(16, 1), Problem(16)
    assert made[:2] == [checked, checked] and set(made[2:]) == {timed}
    assert ran.count(checked) == 4 and set(ran) == {checked, timed}   # baseline + candidate, twice
    assert {c.name for c in result.with_status(REJECTED)} == {"t32"} and result.winner == Config(16)
    monkeypatch.setattr(fam, "check_problem", lambda p: Problem(8))
    made.clear()
    with pytest.raises(SweepError, match=r"check_problem made .*whose key differs \('n8', not 'n16'\)"):
        sweep({"baseline": 1.0, "t16": 0.5})
    assert made == []


def test_check_problems_keep_the_key_and_leave_partial_tiles():
    """dyt's check problem has an odd row count of the key's bucket (one row fewer than an even
    count; channels-first, the first odd count below whose rows still split into several
    channels, so the check reads a weight per channel), so2's one edge more than an even edge
    count: the same key, a partial last row block for every power-of-two tile; odd sizes are
    checked as they are. grouped_glu_mlp keeps its problem: its random expert counts leave
    partial row tiles at the key's T, two experts included (before, one of two took every
    token: full tiles)."""
    from tilefuse.ops.dyt.configs import DyTProblem
    from tilefuse.ops.dyt.tune import FAMILY as dyt_family
    from tilefuse.ops.dyt.tune import _channels
    from tilefuse.ops.grouped_glu_mlp.tune import FAMILY as grouped_family, GroupedProblem
    from tilefuse.ops.so2_mixing_stack import tune as so2_tune
    cf = [DyTProblem("bwd", rows, 64, 4, True) for rows in (4, 32, 4096, 8192, 2 ** 19)]
    for p in dyt_family.default_problems() + cf:
        q = dyt_family.check_problem(p)
        assert dyt_family.key(q) == dyt_family.key(p) and q.n_rows % 2 == 1 and q.n_rows < p.n_rows
        assert dataclasses.replace(q, n_rows=p.n_rows) == p
        if p.param_per_row and p.n_rows > 4:
            assert _channels(q.n_rows) > 1, (p, q)
        elif not p.param_per_row:
            assert q.n_rows == p.n_rows - 1
    odd = DyTProblem("fwd", 37, 16, 4, False)
    assert dyt_family.check_problem(odd) is odd and dyt_family.check_problem(DyTProblem("fwd", 2, 8, 4, False)).n_rows == 2
    so2 = so2_tune.So2Family()
    for p in so2.default_problems():
        q = so2.check_problem(p)
        assert so2.key(q) == so2.key(p) and q.n_edges == p.n_edges + 1
    assert so2.check_problem(dataclasses.replace(p, n_edges=1001)).n_edges == 1001
    x = dyt_family.make_inputs(dyt_family.check_problem(cf[2]), torch.device("cpu"), 0).x
    assert x.shape == (9, 455, 64)                 # 4095 rows: 455 channels, not 1
    p = GroupedProblem.of(256, 16, 32, 2, 2, "swiglu", 32, False)
    assert grouped_family.check_problem(p) is p
    counts = grouped_family.make_inputs(p, torch.device("cpu"), 0)["counts"]
    assert counts.sum() == 256 and all(0 < int(c) and int(c) % 64 for c in counts), counts


def test_a_problem_that_is_not_the_keys_own_is_recorded():
    """A problem of the key but not the key's representative one (a model's, from
    tilefuse.tune(model)) is recorded in ``sweep_problem`` too, so the entry's times say what
    they timed; the representative problem records none."""
    family([Config(16)])
    timer = FakeTimer({"baseline": 1.0, "t16": 0.5})
    tuning.sweep_key("fake", Problem(16, 3), timer=timer, rounds=3, device="cpu")
    measured = store.load(tuning.table_location()[1], tuning.table_location()[0])["fake"]["n16"].measured
    assert measured["sweep_problem"] == repr(Problem(16, 3))
    sweep({"baseline": 1.0, "t16": 0.5})   # Problem(16), the key's own, swept again
    measured = store.load(tuning.table_location()[1], tuning.table_location()[0])["fake"]["n16"].measured
    assert "sweep_problem" not in measured


def test_so2_sweeps_fit_the_device_memory(monkeypatch):
    """so2's representative E (2^19) is halved where its sweep's peak would not fit: the (6, 96)
    and (6, 128) keys on an 80 GB H100 (the tune ran out of memory there, -ak run 3), their
    level-3 keys further (-at run 3) and on an H200 too, no other key on an H200 (the shipped
    table's sweeps) nor (3, 64)'s level-3 key on the H100 (swept at 2^19 there), nothing on the
    CPU, never below MIN_SWEEP_EDGES."""
    from types import SimpleNamespace
    from tilefuse.ops.so2_mixing_stack import tune as so2_tune
    fam, cuda = so2_tune.So2Family(), torch.device("cuda", 0)

    def resized(total_memory):
        monkeypatch.setattr(torch.cuda, "get_device_properties", lambda d: SimpleNamespace(total_memory=total_memory))
        out = {}
        for lmax, cf in so2_tune.DEFAULT_SHAPES:
            for kw in ({}, {"forward": True}, {"level3": True}):
                p = so2_tune.So2Problem(lmax, cf, 4, **kw)
                q = fam.sweep_problem(p, cuda)
                assert fam.key(q) == fam.key(p) and dataclasses.replace(q, n_edges=p.n_edges) == p
                if q != p:
                    out[fam.key(p)] = q.n_edges
        return out

    assert resized(85_031_714_816) == {**{f"L6-C{c}-x4{s}": 2 ** 18 for c in (96, 128) for s in ("", "-fwd")},
                                       "L6-C96-x4-l3": 2 ** 17, "L6-C128-x4-l3": 2 ** 17}
    assert resized(150_121_545_728) == {"L6-C96-x4-l3": 2 ** 18, "L6-C128-x4-l3": 2 ** 17}    # an H200
    assert set(resized(1 << 30).values()) == {so2_tune.MIN_SWEEP_EDGES}     # 1 GiB: the floor
    p = so2_tune.So2Problem(6, 128, 4)
    assert fam.sweep_problem(p, torch.device("cpu")) is p


def test_wrong_or_unwritten_outputs_are_rejected_and_not_timed():
    family([Config(16), Config(32), Config(128)], {"t16": "wrong", "t32": "hole"})
    result, timer = sweep({"baseline": 1.0, "t16": 0.1, "t32": 0.1, "t128": 0.97})
    rejected = {c.name: c.reason for c in result.with_status(REJECTED)}
    assert rejected == {"t16": "y: not bitwise equal",
                        "t32": "y: non-finite values (unwritten elements or overflow)"}
    assert set(timer.order) == {"baseline", "t128"}
    assert result.winner == Config(128)


def test_a_familys_own_validation_runs_see_poisoned_allocations():
    """A family's validate may run the candidate again (so2's level-3 validation: the training
    backward, the range-limit sets): its allocations come back NaN-filled too, so an element
    those runs leave unwritten cannot pass as a finite value."""
    seen = []

    class Validating(FakeFamily):
        def validate(self, problem, choice, inputs, got, want):
            hole = torch.empty(64)        # what an extra run's unwritten output would hold
            seen.append(bool(torch.isnan(hole).all()))
            return self.compare(problem, inputs, got, want), None

    fam = Validating([Config(16)])
    tuning.unregister_family("fake")
    tuning.register_family(fam)
    result, _ = sweep({"baseline": 1.0, "t16": 0.5})
    assert seen == [True] and result.winner == Config(16)


@pytest.mark.parametrize("silent", ["t32", "t64"], ids=["candidate", "baseline"])
def test_a_choice_that_did_not_launch_its_kernel_fails_the_sweep(silent):
    family([Config(16), Config(32)], {silent: "silent"})
    name = "baseline" if silent == "t64" else silent
    with pytest.raises(EngagementError, match=f"{name} did not launch fake_kernel"):
        sweep({"baseline": 1.0, "t16": 1.0, "t32": 1.0})
    assert not tuning.is_covered("fake", "n16")


def test_the_sweep_runs_at_the_level_that_reads_the_table():
    family([Config(16)], {"t16": "guard"})          # the kernel only runs at level >= 2
    with tilefuse.level(0):
        result, _ = sweep({"baseline": 1.0, "t16": 0.5})
    assert result.winner == Config(16)


def test_no_sweep_where_kernels_cannot_run(monkeypatch):
    family([Config(16)])
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    with pytest.raises(SweepError, match="kernels cannot run on cpu"):
        sweep({"baseline": 1.0, "t16": 0.5})
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    with pytest.raises(SweepError, match="timing needs a CUDA device"):
        tuning.sweep_key("fake", Problem(16), device="cpu")


def test_interleaved_order_rotates_every_round():
    family([Config(16), Config(32)])
    _, timer = sweep({"baseline": 1.0, "t16": 1.0, "t32": 1.0}, rounds=4)
    rounds = [timer.order[i:i + 3] for i in range(0, 12, 3)]
    first = rounds[0]
    assert sorted(first) == ["baseline", "t16", "t32"]
    assert rounds == [first[r % 3:] + first[:r % 3] for r in range(4)]


def test_speedup_uses_ratios_within_each_round():
    """A clock drifting by 2x over the rounds changes nothing: each ratio is taken within one
    round; the spread is the interquartile range of those ratios."""
    family([Config(16)])
    drift = [1.0, 1.2, 1.5, 1.8, 2.0]
    result, _ = sweep({"baseline": drift, "t16": [0.9 * d for d in drift[:-1]] + [0.95 * 2.0]})
    c = result.with_status(TIMED)[0]
    assert c.speedup == pytest.approx(1 / 0.9)
    assert c.spread[0] == pytest.approx(1 / 0.9) and c.spread[1] == pytest.approx(1 / 0.9)
    assert c.median_s == pytest.approx(0.9 * 1.5)


def test_within_one_percent_of_the_best_the_simpler_config_wins():
    family([Config(16), Config(32), Config(128)])
    result, _ = sweep({"baseline": 1.0, "t16": 0.905, "t32": 0.95, "t128": 0.90})
    assert result.winner == Config(16)
    result, _ = sweep({"baseline": 1.0, "t16": 0.92, "t32": 0.95, "t128": 0.90}, record=False)
    assert result.winner == Config(128)


@pytest.mark.parametrize("route,time,wins", [
    (False, 1 / 1.005, False), (False, 1 / 1.02, True),
    (True, 1 / 1.02, False), (True, 1 / 1.04, True),
], ids=["tile-0.5%", "tile-2%", "route-2%", "route-4%"])
def test_margins_tile_one_percent_route_three(route, time, wins):
    config = Config(16, route=route)
    family([config])
    result, _ = sweep({"baseline": 1.0, config.name: time})
    assert result.winner == (config if wins else BASELINE)
    assert tuning.is_covered("fake", "n16")          # a lost sweep records BASELINE
    assert tuning.lookup_config("fake", Problem(16)) == (config if wins else None)


@pytest.mark.parametrize("tile,route,winner", [
    (1 / 1.50, 1 / 1.52, "t16"),            # the route 1.3% over the best tiling: the tiling
    (1 / 1.50, 1 / 1.56, "t32-route"),      # 4% over it
    (1 / 1.005, 1 / 1.034, BASELINE),       # 3.4% over the baseline, 2.9% over a tiling that lost
], ids=["route-1.3%-over-the-tiling", "route-4%-over-it", "route-under-a-losing-tiling"])
def test_a_route_change_must_beat_the_best_simpler_route_by_the_route_margin(tile, route, winner):
    """The best unfused route is the bar, not the baseline alone: a route change is eligible
    only 3% above the fastest timed candidate of every lower ``route_rank`` (the default: tile
    changes 0, route changes 1), whether or not that one won itself."""
    family([Config(16), Config(32, route=True)])
    result, _ = sweep({"baseline": 1.0, "t16": tile, "t32-route": route})
    assert result.winner == (BASELINE if winner == BASELINE else next(
        c.choice for c in result.candidates if c.name == winner))


def test_route_ranks_are_the_familys_ladder_and_ties_stay_among_the_eligible():
    """A family's own ranks (here by tile: t16 and t32 0, t48-route 1, t128-route 2): each
    rung must clear every lower rung's best by 3%. The tie rule then runs among the eligible
    only: a higher rung within 1% of the best does not move the tie window away from a simpler
    config."""
    class Ladder(FakeFamily):
        def route_rank(self, config):
            return {16: 0, 32: 0, 48: 1, 128: 2}[config.tile]

    fam = Ladder([Config(16), Config(32), Config(48, route=True), Config(128, route=True)])
    tuning.unregister_family("fake")
    tuning.register_family(fam)
    assert fam.route_rank(Config(128, route=True)) == 2 and FakeFamily([]).route_rank(Config(8, route=True)) == 1
    # rank 1 at 1.55 clears rank 0's 1.50 by 3.3%; rank 2 at 1.58 clears 1.50 but not 1.55
    result, _ = sweep({"baseline": 1.0, "t16": 1 / 1.50, "t32": 1 / 1.49, "t48-route": 1 / 1.55,
                       "t128-route": 1 / 1.58})
    assert result.winner == Config(48, route=True)
    # rank 2 at 1.60 clears both (1.55 * 1.03 = 1.5965): it wins
    result, _ = sweep({"baseline": 1.0, "t16": 1 / 1.50, "t32": 1 / 1.49, "t48-route": 1 / 1.55,
                       "t128-route": 1 / 1.60}, record=False)
    assert result.winner == Config(128, route=True)
    # the routes miss 3% over the best tiling (1.505): only the tilings are eligible, and t16 is
    # within 1% of t32 (without the rank rule t128-route's 1.52 set the window, and t32 won)
    result, _ = sweep({"baseline": 1.0, "t16": 1 / 1.50, "t32": 1 / 1.505, "t48-route": 1 / 1.51,
                       "t128-route": 1 / 1.52}, record=False)
    assert result.winner == Config(16)


# --- the one timing harness (tuning.timing), which check and benchmarks/ use too ---------

def test_sweep_and_check_share_one_timing_harness():
    from tilefuse.check import bench
    from tilefuse.tuning import sweep as sweep_module
    from tilefuse.tuning import timing
    assert sweep_module.interleave is timing.interleave and sweep_module.CudaTimer is timing.CudaTimer
    assert bench.Timing is timing.Timing and not hasattr(bench, "_time_calls") and not hasattr(bench, "as_graph")


def test_interleaved_rotates_reports_failures_and_keeps_per_round_samples():
    from tilefuse.tuning import timing
    timer = FakeTimer({"a": [1.0, 2.0, 3.0], "b": 0.5})
    real_prepare = timer.prepare

    def prepare(label, call, n_buffers):
        if label == "broken":
            raise RuntimeError("warm-up failed")
        call(0)   # the provider itself runs (warm-up) with the buffer index dropped
        return real_prepare(label, call, n_buffers)

    timer.prepare = prepare
    calls = []
    out = timing.interleaved({"a": lambda: calls.append("a"), "broken": lambda: None, "b": lambda: calls.append("b")},
                             rounds=3, timer=timer)
    assert isinstance(out["broken"], RuntimeError) and calls == ["a", "b"]
    assert timer.order == ["a", "b", "b", "a", "a", "b"]                  # rotated each round
    a, b = out["a"], out["b"]
    assert (a.median_ms, a.min_ms, a.max_ms, a.rounds) == (2000.0, 1000.0, 3000.0, 3)
    assert a.samples_ms == (1000.0, 2000.0, 3000.0) and a.spread == 1.0
    assert timing.ratio(a, b) == pytest.approx(4.0)                       # within rounds


def test_interleaved_reports_a_provider_that_raises_in_a_timed_round():
    """A provider whose timed sample raises (out of memory in round 2) is returned as its
    exception, as one failing in warm-up is (check and bench show it as a failed row), and
    leaves the later rounds; the others are timed over every round."""
    from tilefuse.check import bench
    from tilefuse.tuning import timing
    timer = FakeTimer({"a": 1.0, "oom": [0.5, OOM], "b": 2.0})
    out = timing.interleaved({"a": lambda: None, "oom": lambda: None, "b": lambda: None}, rounds=4, timer=timer)
    assert out["oom"] is OOM and timer.order.count("oom") == 2
    assert (out["a"].rounds, out["b"].rounds) == (4, 4) and timing.ratio(out["b"], out["a"]) == 2.0
    assert bench.timing_fields(out["oom"])["status"] == "failed"


def test_ratio_is_taken_within_rounds():
    from tilefuse.tuning.timing import Timing, ratio
    drift = Timing(2.0, 1.0, 4.0, 3, (1.0, 2.0, 4.0))       # a clock drifting over the rounds
    half = Timing(1.0, 0.5, 2.0, 3, (0.5, 1.0, 2.0))
    assert ratio(drift, half) == 2.0
    assert ratio(Timing(2.0, 2.0, 2.0, 1), Timing(4.0, 4.0, 4.0, 1)) == 0.5   # no samples: medians


def test_wall_timer_runs_the_protocol_without_cuda():
    from tilefuse.tuning import timing
    n = []
    out = timing.interleaved({"f": lambda: n.append(1)}, rounds=3, timer=timing.WallTimer())
    assert len(n) == 4 and out["f"].rounds == 3 and out["f"].median_ms >= 0   # warm-up + one call a round


def test_interleaving_refuses_no_rounds_before_any_call():
    """rounds below 1 (or not an int) is refused up front, naming it: before, interleaved warmed
    every provider up (minutes of compiles in a benchmark) and then failed on the median of no
    samples (StatisticsError: no median for empty data)."""
    from tilefuse.tuning import timing
    calls = []
    for bad, exc in ((0, ValueError), (-1, ValueError), (True, TypeError), (2.0, TypeError)):
        with pytest.raises(exc, match="rounds must be an int >= 1"):
            timing.interleaved({"f": lambda: calls.append(1)}, rounds=bad, timer=timing.WallTimer())
        with pytest.raises(exc, match="rounds must be an int >= 1"):
            timing.interleave({"f": lambda: calls.append(1)}, bad)
    assert calls == []


def test_cuda_timer_options_without_a_gpu():
    """What a CudaTimer is built with (the GPU half is tests/test_tuning_gpu.py)."""
    import math
    from tilefuse.tuning.timing import CudaTimer
    t = CudaTimer(graph_below_s=math.inf, min_reps=3, max_reps=2000)
    assert t.device is None and t.graph_below_s == math.inf and (t.min_reps, t.max_reps) == (3, 2000)
    assert CudaTimer("cuda:1").device == torch.device("cuda", 1)
    assert t.settle_s == 0.0 and CudaTimer(settle_s=0.5).settle_s == 0.5
    for bad in (-1.0, float("nan")):
        with pytest.raises(ValueError, match="settle_s"):
            CudaTimer(settle_s=bad)


def test_interleaved_passes_its_sample_and_settle_times_to_the_cuda_timer(monkeypatch):
    """``interleaved(target_ms=, settle_ms=)``: the CudaTimer it builds samples for target_ms
    after settle_ms of untimed calls (the sustained protocol: 2 s blocks)."""
    from tilefuse.tuning import timing
    built = []

    class Recording(FakeTimer):
        def __init__(self, *args, **kwargs):
            built.append(kwargs)
            super().__init__({"f": 1.0})

    monkeypatch.setattr(timing, "CudaTimer", Recording)
    out = timing.interleaved({"f": lambda: None}, rounds=2, target_ms=1500.0, settle_ms=500.0)
    assert out["f"].rounds == 2
    assert built[0]["min_sample_s"] == pytest.approx(1.5) and built[0]["settle_s"] == pytest.approx(0.5)
    timing.interleaved({"f": lambda: None}, rounds=1, **timing.SUSTAINED)   # the named protocol: the same blocks
    assert built[-1]["min_sample_s"] == pytest.approx(1.5) and built[-1]["settle_s"] == pytest.approx(0.5)
    timing.interleaved({"f": lambda: None}, rounds=1)
    assert built[-1]["settle_s"] == 0.0
