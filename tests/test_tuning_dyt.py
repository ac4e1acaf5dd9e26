"""dyt on the tuning mechanism, end to end with the real kernels (Triton's interpreter on the
CPU) and a fake timer: sweeps, what level 2 then runs, tune(model), the CLI, and a
two-rank torch.distributed tune."""

import json
import multiprocessing
import os
import threading

import pytest
import torch

import tilefuse
from tilefuse import tuning
from tilefuse.ops.dyt import configs, launch
from tilefuse.ops.dyt.configs import DyTConfig, DyTProblem
from tilefuse.ops.dyt.tune import FAMILY as DYT
from tilefuse.tuning import BASELINE, command, runner, table
from tilefuse.tuning.sweep import TIMED

from dyt_helpers import check_against_reference
from tuning_helpers import FakeTimer

pytestmark = [pytest.mark.skipif(torch.cuda.is_available(), reason="CPU interpreter sweeps (fake timer)"),
              pytest.mark.usefixtures("tuning_table")]


@pytest.mark.parametrize("problem,fast", [
    (DyTProblem("fwd", 64, 32, 2, False), "M16-N32-w2-p4"),
    (DyTProblem("bwd", 32, 16, 4, True), "M32-N16-w2-p1"),
], ids=["fwd-M64-N32-bf16", "bwd-M32-N16-fp32-channels-first"])
def test_real_sweep_checks_every_candidate_and_records_the_winner(problem, fast):
    result = tuning.sweep_key("dyt", problem, timer=FakeTimer(fast, 0.8), rounds=3, device="cpu")
    n_candidates = len(configs.candidates(problem)) - 1
    assert len(result.with_status(TIMED)) == n_candidates, [c.reason for c in result.candidates]
    assert result.winner.name == fast and tuning.lookup_config("dyt", problem).name == fast
    assert result.baseline.choice == configs.heuristic(problem)


def test_the_recorded_winner_runs_at_level_2_and_not_at_level_1(monkeypatch):
    problem = DyTProblem("fwd", 64, 32, 2, False)
    tuning.sweep_key("dyt", problem, timer=FakeTimer("M16-N32-w2-p4", 0.8), rounds=2, device="cpu")
    picked = []
    real_pick = launch.pick_config
    monkeypatch.setattr(launch, "pick_config", lambda p, level=None: picked.append(real_pick(p, level)) or picked[-1])
    x = torch.randn(50, 32).to(torch.bfloat16)            # 50 rows: the M64 bucket
    alpha, w, b = torch.tensor([0.7]), torch.randn(32), torch.randn(32)
    with tilefuse.level(2):
        y = tilefuse.dyt(x, alpha, w, b)
    with tilefuse.level(1):
        tilefuse.dyt(x, alpha, w, b)
    assert [c.name for c in picked] == ["M16-N32-w2-p4", configs.heuristic(problem).name]
    check_against_reference(x, alpha, w, b, None, True, (y, None, None, None, None))


def test_dyt_compare_tolerances():
    problem = DyTProblem("bwd", 64, 32, 4, False)
    inputs = DYT.make_inputs(problem, torch.device("cpu"), 0)
    want = DYT.run(problem, DYT.baseline(problem), inputs)
    assert DYT.compare(problem, inputs, want, want) == []
    one_ulp = dict(want, dx=torch.nextafter(want["dx"], torch.full_like(want["dx"], float("inf"))))
    assert DYT.compare(problem, inputs, one_ulp, want) == []
    # One row missing from dweight: a reduction bug, far outside the reordering bound.
    t = torch.tanh(inputs.alpha * inputs.x.float())
    dropped = dict(want, dweight=want["dweight"] - inputs.dy[0] * t[0])
    (message,) = DYT.compare(problem, inputs, dropped, want)
    assert message.startswith("dweight:")


class TinyDyT(torch.nn.Module):
    def __init__(self, width):
        super().__init__()
        self.alpha = torch.nn.Parameter(torch.tensor([0.5]))
        self.weight = torch.nn.Parameter(torch.ones(width))
        self.bias = torch.nn.Parameter(torch.zeros(width))
        self.proj = torch.nn.Linear(width, width)

    def forward(self, x):
        return self.proj(tilefuse.dyt(x, self.alpha, self.weight, self.bias))


def test_tune_model_collects_its_keys_and_sweeps_only_uncovered_ones():
    model, x = TinyDyT(16), torch.randn(4, 8, 16)
    with torch.no_grad():
        assert set(tuning.model.collect(model, x)) == {("dyt", "fwd-M32-N16-x4")}
    table.record("dyt", {"bwd-M32-N16-x4": {"winner": BASELINE}})
    results = tuning.tune(model, (x,), timer=FakeTimer("M32-N16-w2-p4", 0.8), rounds=2, progress=False,
                          device="cpu")
    assert [r.key for r in results] == ["fwd-M32-N16-x4"]
    assert tuning.get_entry("dyt", "fwd-M32-N16-x4").name == "M32-N16-w2-p4"
    assert all(p.grad is None for p in model.parameters())     # the backward left no trace
    assert tuning.tune(model, x, timer=FakeTimer("", 0.8), progress=False, device="cpu") == []


def _on_a_thread_python_did_not_start(fn):
    """fn() on a thread started by _thread, outside threading's registry (threading sees it as a
    _DummyThread, as it sees autograd's own C++ worker threads)."""
    import _thread
    done = threading.Event()

    def run():
        try:
            fn()
        finally:
            done.set()
    _thread.start_new_thread(run, ())
    assert done.wait(60)


@pytest.mark.parametrize("below", ["set_level", "TILEFUSE_LEVEL"])
def test_collect_sees_the_backward_keys_where_the_backward_runs_on_another_thread(below, monkeypatch):
    """At a process-wide level below 2 (set_level(1) or TILEFUSE_LEVEL=1), collect still finds
    dyt's backward key when autograd runs the backward on a thread of its own, as it does on
    CUDA (simulated on the CPU), which sees no level block; the level is put back afterwards."""
    real_grad = torch.autograd.grad

    def grad_on_another_thread(*args, **kwargs):
        out = []
        _on_a_thread_python_did_not_start(lambda: out.append(real_grad(*args, **kwargs)))
        return out[0]

    monkeypatch.setattr(torch.autograd, "grad", grad_on_another_thread)
    if below == "set_level":
        tilefuse.set_level(1)
    else:
        monkeypatch.setenv("TILEFUSE_LEVEL", "1")
    model, x = TinyDyT(16), torch.randn(4, 8, 16)
    assert set(tuning.model.collect(model, x)) == {("dyt", "fwd-M32-N16-x4"), ("dyt", "bwd-M32-N16-x4")}
    assert tilefuse.get_level() == 1
    monkeypatch.setenv("TILEFUSE_LEVEL", "3")
    assert tilefuse.get_level() == (1 if below == "set_level" else 3)   # no set_level left behind


def test_collecting_records_only_its_own_threads_lookups():
    """A collecting() block records the lookups of the thread that opened it (and nested blocks
    each see them), never another thread's: a second thread calling tilefuse while a model is
    collected, or collecting its own model at the same time, leaves the first one's keys as
    they are."""
    def model_of(cols):
        a, w, b = torch.tensor([0.5]), torch.ones(cols), torch.zeros(cols)
        return lambda x: tilefuse.dyt(x, a, w, b)

    inside, out = threading.Barrier(2), {}

    def worker(name, cols, first):
        m = model_of(cols)

        def model(x):
            inside.wait()            # both threads inside their blocks
            if not first:
                inside.wait()        # the other thread's model ran first
            y = m(x)
            if first:
                inside.wait()
            return y
        with torch.no_grad():
            out[name] = set(tuning.model.collect(model, torch.randn(8, cols)))

    threads = [threading.Thread(target=worker, args=("a", 64, True)),
               threading.Thread(target=worker, args=("b", 32, False))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert out == {"a": {("dyt", "fwd-M8-N64-x4")}, "b": {("dyt", "fwd-M8-N32-x4")}}

    other = model_of(32)
    with table.collecting() as outer, table.collecting() as inner:
        t = threading.Thread(target=other, args=(torch.randn(8, 32),))
        t.start()
        t.join()
        model_of(64)(torch.randn(8, 64))
    assert set(outer) == set(inner) == {("dyt", "fwd-M8-N64-x4")}
    assert not table._collectors


def test_counting_counts_only_its_own_threads_launches():
    """A launches.counting() block counts the launches of the thread that opened it (nested
    blocks each count them), never another thread's: a sweep's engagement check (run_engaged)
    or a check's row is not satisfied by another thread's kernel. The other thread's own block counts it; snapshot() still counts every launch."""
    from tilefuse import launches
    x, a, w = torch.randn(4, 32), torch.tensor([0.5]), torch.ones(32)
    theirs = {}

    def other_thread():
        with launches.counting() as launched:
            tilefuse.dyt(x, a, w)
        theirs.update(launched)

    before = launches.snapshot()["dyt_fwd"]
    with launches.counting() as outer:
        t = threading.Thread(target=other_thread)
        t.start()
        t.join()
        assert not outer
        with launches.counting() as inner:
            tilefuse.dyt(x, a, w)
    assert dict(outer) == dict(inner) == theirs == {"dyt_fwd": 1}
    assert launches.snapshot()["dyt_fwd"] == before + 2
    assert not launches._blocks


def test_counting_counts_a_backward_autograd_runs_on_another_thread():
    """Autograd runs a CUDA backward on a thread of its own (simulated on the CPU: the gradient
    taken on a thread Python did not start), which opened no block: while it runs that graph
    task its launches go into every open block (utils.blocks_here, collecting()'s rule), so the
    backward's kernel counts for the thread that asked for it. A Python thread's own backward
    does not (on the CPU a backward runs on the thread that called it): before, it went into
    another thread's block, and a sweep's engagement check could be passed by it."""
    from tilefuse import launches
    x = torch.randn(4, 32, requires_grad=True)
    a, w = torch.tensor([0.5]), torch.ones(32)
    with launches.counting() as launched:
        y = tilefuse.dyt(x, a, w)
        _on_a_thread_python_did_not_start(lambda: torch.autograd.grad(y, x, torch.ones_like(y)))
    assert dict(launched) == {"dyt_fwd": 1, "dyt_bwd": 1}
    y = tilefuse.dyt(x, a, w)
    with launches.counting() as launched, table.collecting() as seen:
        t = threading.Thread(target=lambda: torch.autograd.grad(y, x, torch.ones_like(y)))
        t.start()
        t.join()
    assert not launched and not seen


def test_snapshot_loses_no_count_to_threads():
    """Every launch counts once in snapshot() whichever thread makes it, a kernel's first
    included (a Counter's first count runs Python code, where another thread switched in and
    its count was lost: 10 of 2400)."""
    import sys
    from tilefuse import launches
    names = [f"test-snapshot-{i}" for i in range(300)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)   # threads switch as often as CPython lets them
    try:
        for name in names:
            barrier = threading.Barrier(8)

            def worker(name=name, barrier=barrier):
                barrier.wait()
                launches.record(name)
            threads = [threading.Thread(target=worker) for _ in range(8)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
    finally:
        sys.setswitchinterval(interval)
    counts = launches.snapshot()
    assert [counts[n] for n in names] == [8] * len(names)


def test_cli_show_gives_a_speedup_recorded_without_its_spread(capsys):
    """An entry's measured speedup shows with its spread where it has one, alone where it has
    none (two shipped so2 entries, replayed from their sweep logs, carry no spread)."""
    cfg = DYT.config_to_dict(DyTConfig(64, 64, 4, 1))
    table.register_entries("dyt", {"bwd-M65536-N64-x4": {"winner": cfg, "measured": {"speedup": 1.115}},
                                   "bwd-M131072-N64-x4": {"winner": cfg, "measured": {"speedup": 1.2,
                                                                                      "spread": [1.1, 1.3]}}})
    try:
        assert command.main(["--show"]) == 0
    finally:
        tuning.unregister("dyt")
    rows = {line.split()[1]: line for line in capsys.readouterr().out.splitlines()[3:] if line.strip()}
    assert rows["bwd-M65536-N64-x4"].split()[4] == "1.115x"
    assert "1.200x [1.100-1.300]" in rows["bwd-M131072-N64-x4"]


def test_cli_show_shape_errors_and_default_grid(monkeypatch, capsys):
    assert command.main(["--show"]) == 0
    assert "no entries" in capsys.readouterr().out
    tuning.register("dyt", {"fwd-M8192-N8192-x4": BASELINE, "bwd-M65536-N64-x4": DyTConfig(64, 64, 4, 1)})
    assert command.main(["--show"]) == 0
    rows = {tuple(line.split()[1:4]) for line in capsys.readouterr().out.splitlines()[3:]}
    assert {("bwd-M65536-N64-x4", "runtime", "M64-N64-w4-p1"),
            ("fwd-M8192-N8192-x4", "runtime", "baseline")} <= rows

    for argv in (["--shape", "64x32"], ["--op", "dyt", "--shape", "64by32"],
                 ["--op", "dyt", "--shape", "64x32", "--dtype", "int8"], ["--all-defaults", "--dtype", "bf16"],
                 # options that do not apply to --show / --export-builtin, and device lists no sweep can use
                 ["--show", "--op", "dyt"], ["--show", "--rounds", "1"], ["--export-builtin", "/tmp/x", "--dry-run"],
                 ["--export-builtin", "/tmp/x", "--force"], ["--all-defaults", "--devices", "-1"],
                 ["--all-defaults", "--devices", "0,0"]):
        with pytest.raises(SystemExit) as exc:
            command.main(argv)
        assert exc.value.code == 2
    capsys.readouterr()

    swept = []
    monkeypatch.setattr(command, "_gpu_missing", lambda devices: None)     # sweeps need a GPU
    monkeypatch.setattr(command, "sweep_parallel", lambda items, devices, **kw: swept.extend(items) or ([], []))
    assert command.main(["--all-defaults", "--op", "dyt", "--no-progress"]) == 0
    keys = [DYT.key(p) for _, p in swept]
    assert len(keys) == 39 and "fwd-M8192-N8192-x4" not in keys    # 40 in the grid, one covered
    assert "fwd-M4194304-N16-x2" in keys and "bwd-M8192-N8192-x4" in keys
    assert "1 of 40 keys already covered" in capsys.readouterr().out


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal without a GPU")
def test_cli_sweep_without_a_gpu_fails_loudly_and_records_nothing(capsys):
    assert command.main(["--op", "dyt", "--shape", "64x32", "--pass", "fwd", "--no-progress"]) == 2
    assert "no CUDA device; nothing swept" in capsys.readouterr().err
    assert not tuning.is_covered("dyt", "fwd-M64-N32-x4")


def test_each_key_prints_its_result_and_every_timed_candidate_as_it_finishes(capsys):
    """A sweep stopped by a timeout keeps the evidence of the keys it finished."""
    problem = DyTProblem("bwd", 32, 16, 4, False)
    results, errors = runner.sweep_each([("dyt", problem)], device="cpu", timer=FakeTimer("M32-N16-w2-p1", 0.8),
                                        rounds=2, record=False, progress=False)
    assert not errors and len(results) == 1
    lines = capsys.readouterr().out.splitlines()
    swept = [line for line in lines if line.startswith("swept: dyt  bwd-M32-N16-x4  M32-N16-w2-p1  1.250x")]
    timed = [line for line in lines if line.startswith("timed:  dyt bwd-M32-N16-x4: baseline ")]
    assert len(swept) == 1 and len(timed) == 1
    n_timed = len(results[0].with_status(TIMED))
    assert timed[0].count(" us") == 1 + n_timed and "M32-N16-w2-p1 800000.0 us 1.250x" in timed[0]


def test_parallel_sweep_one_process_per_device_merges_into_one_table():
    items = [("dyt", DyTProblem(p, 32, 16, 4, False)) for p in ("fwd", "bwd")]
    results, errors = runner.sweep_parallel(items, ["cpu", "cpu"], timer=FakeTimer("M32-N16-w2-p1", 0.8),
                                            rounds=2, progress=False)
    assert not errors and sorted(r.key for r in results) == ["bwd-M32-N16-x4", "fwd-M32-N16-x4"]
    assert tuning.get_entry("dyt", "bwd-M32-N16-x4").name == "M32-N16-w2-p1"
    assert tuning.get_entry("dyt", "fwd-M32-N16-x4") == BASELINE     # M32-N16-w2-p1 is bwd only


def _rank_main(rank, world, init_file, tmp, record=True):
    os.environ["TILEFUSE_CACHE_DIR"] = os.path.join(tmp, f"cache{rank}")   # separate local files
    torch.distributed.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank,
                                         world_size=world)
    try:
        # Rank 0 has swept the backward key (the baseline won); rank 1's own file disagrees.
        local = BASELINE if rank == 0 else {"block_m": 32, "block_n": 16, "num_warps": 2,
                                            "programs_per_sm": 8, "prefetch": False}
        table.record("dyt", {"bwd-M32-N16-x4": {"winner": local}})
        results = tuning.tune(TinyDyT(16), torch.randn(4, 8, 16), timer=FakeTimer("M32-N16-w2-p4", 0.8),
                              rounds=2, progress=False, device="cpu", record=record)
        entry = lambda key: str(getattr(tuning.get_entry("dyt", key), "name", tuning.get_entry("dyt", key)))
        with open(os.path.join(tmp, f"rank{rank}.json"), "w") as f:
            json.dump({"swept": [r.key for r in results], "fwd": entry("fwd-M32-N16-x4"),
                       "bwd": entry("bwd-M32-N16-x4")}, f)
    finally:
        torch.distributed.destroy_process_group()


def _two_ranks(target, tmp_path, *args) -> list:
    """Run ``target(rank, 2, init file, tmp_path, *args)`` on two spawned gloo ranks; each
    rank's report (its rank{r}.json)."""
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=target, args=(r, 2, str(tmp_path / "init"), str(tmp_path), *args)) for r in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    return [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]


@pytest.mark.parametrize("record", [True, False], ids=["record", "no-record"])
def test_distributed_rank_0_decides_and_all_ranks_run_the_same(tmp_path, record):
    """Rank 0's decisions reach every rank's table; with record=False no rank's table changes
    (as in one process): each keeps its own file's entries and the swept key stays absent."""
    ranks = _two_ranks(_rank_main, tmp_path, record)
    assert ranks[0]["swept"] == ["fwd-M32-N16-x4"] and ranks[1]["swept"] == []
    if not record:
        assert [r["fwd"] for r in ranks] == ["None", "None"]
        assert ranks[0]["bwd"] == BASELINE and ranks[1]["bwd"] == "M32-N16-w2-p8"   # each its own file's
        return
    for r in ranks:
        assert r["fwd"] == "M32-N16-w2-p4" and r["bwd"] == BASELINE


def _rank_main_level3(rank, world, init_file, tmp):
    os.environ["TILEFUSE_CACHE_DIR"] = os.path.join(tmp, f"cache{rank}")
    from tilefuse.ops.so2_mixing_stack.tune import FAMILY, So2Problem
    from tilefuse.tuning import model
    from tuning_helpers import level3_record
    torch.distributed.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank,
                                         world_size=world)
    try:
        key = "L3-C32-x4-l3"
        variant = FAMILY.candidates(FAMILY.problem_for_key(key))[0]
        validation = level3_record(key, variant)
        if rank == 0:   # rank 0 swept the key earlier: a validated level-3 variant won
            table.record("so2_mixing_stack", {key: {"winner": FAMILY.config_to_dict(variant),
                                                    "measured": {"validation": validation}}})
        model.collect = lambda m, x: {("so2_mixing_stack", key): So2Problem(3, 32, 4, level3=True)}
        tuning.tune(torch.nn.Identity(), torch.zeros(1), device="cpu", progress=False)
        with open(os.path.join(tmp, f"rank{rank}.json"), "w") as f:
            json.dump({"entry": tuning.get_entry("so2_mixing_stack", key).name,
                       "validation": table.get_measured("so2_mixing_stack", key).get("validation")}, f)
    finally:
        torch.distributed.destroy_process_group()


def test_distributed_tune_carries_a_level3_entry_with_its_validation(tmp_path):
    """A level-3 variant is installed only with its validation record (So2Family.check_entry):
    rank 0 broadcasts whole entries, so every rank gets the variant and its record (a bare
    config could not carry it)."""
    ranks = _two_ranks(_rank_main_level3, tmp_path)
    assert ranks[0] == ranks[1] and "3xfp16" in ranks[0]["entry"] and ranks[0]["validation"]["passed"] is True


def test_collect_finds_the_backward_of_closures_and_dataclass_outputs():
    """A plain callable whose parameters it closes over (neither model.parameters() nor its
    inputs name them) and a module returning a dataclass: both backward keys are seen."""
    import dataclasses
    alpha, weight = torch.nn.Parameter(torch.tensor([0.5])), torch.nn.Parameter(torch.ones(16))
    x = torch.randn(4, 8, 16)
    both = {("dyt", "fwd-M32-N16-x4"), ("dyt", "bwd-M32-N16-x4")}
    assert set(tuning.model.collect(lambda v: tilefuse.dyt(v, alpha, weight), x)) == both

    @dataclasses.dataclass
    class Out:
        y: torch.Tensor

    class Wrapped(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = TinyDyT(16)

        def forward(self, v):
            return Out(self.inner(v))

    model = Wrapped()
    assert set(tuning.model.collect(model, x)) == both
    assert alpha.grad is None and all(p.grad is None for p in model.parameters())


@pytest.mark.parametrize("rows,bucket", [(1, 1), (31, 32), (32, 32), (33, 64), (63, 64), (64, 64), (65, 128)])
def test_the_row_bucket_is_the_next_power_of_two_at_or_above(rows, bucket):
    """The key's row bucket for row counts just below, at and above a power of two: a count
    one past a power of two looks up the next bucket's entry (the one a sweep of that count
    records), never the entry below it."""
    from tilefuse.ops.dyt.tune import key_of
    assert key_of(DyTProblem("fwd", rows, 16, 4, False)) == f"fwd-M{bucket}-N16-x4"
    assert key_of(DyTProblem("bwd", rows, 16, 2, True)) == f"bwd-M{bucket}-N16-x2-cf"
