"""`tilefuse check` runs each op's verification and benchmark (the parts) in a child process
(tilefuse.isolate): a part whose process crashes is a failed row naming how and where, the parts
after it run in a fresh child, and the report is still written.

The targets the children run are this module's functions: a child gets the parent's import
path, so it imports this file as ``test_check_isolate``."""

import ctypes
import json
import os

import pytest
import torch

from tilefuse import check
from tilefuse import isolate
from tilefuse.cli import main

ME = __name__


def _row(op: str, ok: bool = True) -> dict:
    return {"op": op, "path": "p", "case": "c", "ok": ok, "errors": {}, "worst_error_over_bound": 0.0,
            "detail": ""}


def child_segfaults(op, **kw):
    ctypes.string_at(0)          # reads address 0: SIGSEGV, as an interpreter store out of bounds may


def child_returns(op, **kw):
    return {"op": op, "inf": float("inf"), "pair": (1, 2), "kwargs": kw}


def child_pid(op, **kw):
    return os.getpid()


def child_raises(op, **kw):
    raise RuntimeError("an illegal memory access was encountered\nsecond line")


def child_exits(op, **kw):
    os._exit(3)


def child_exits_75_once(op, runs, **kw):
    with open(runs, "a") as f:      # how many times this part ran
        f.write("ran\n")
    os._exit(75)


def child_exits_7_at_the_end(op, **kw):
    import atexit
    atexit.register(os._exit, 7)    # after every part's result: at the child's exit
    return os.getpid()


def child_hangs(op, **kw):
    import threading
    import time
    threading.Thread(target=time.sleep, args=(120,), daemon=True).start()   # another thread's stack in the dump
    time.sleep(120)


def verify_so2_segfaults(op, quick, device, show_progress):
    if op == "so2_mixing_stack":
        child_segfaults(op)
    return [{**_row(op), "detail": str(os.getpid())}]


def benchmark_dyt_segfaults(op, quick, show_progress, out_dir):
    if op == "dyt":
        child_segfaults(op)
    return {"benchmark": {"rows": [], "pid": os.getpid()}, "rows": [], "plots": []}


@pytest.mark.parametrize("target, ended, where", [
    ("child_segfaults", "killed by signal SIGSEGV", "test_check_isolate.py:"),
    ("child_raises", "raised RuntimeError: an illegal memory access was encountered", None),
    ("child_exits", "exited with status 3", None)])
def test_a_child_that_dies_says_how_and_where(target, ended, where):
    out = isolate.call(f"{ME}:{target}", {"op": "dyt"})
    assert not out.ok and out.value is None
    assert ended in out.why() and "second line" not in out.why()
    if where:   # faulthandler's frames, innermost first, the child's own left out
        assert out.frames and where in " ".join(out.frames) and "child_segfaults" in out.frames[1]
        assert not any(f.startswith("tilefuse/isolate.py") for f in out.frames)


def test_a_child_returns_its_value_through_json():
    out = isolate.call(f"{ME}:child_returns", {"op": "dyt", "quick": True})
    assert out.ok and not out.ended
    assert out.value == {"op": "dyt", "inf": float("inf"), "pair": [1, 2], "kwargs": {"quick": True}}


def test_one_child_runs_the_parts_and_a_fresh_one_follows_each_crash():
    """Parts in order: one process until a part kills it; the part that died says how, the
    one that raised says what, and each part after a death ran in a new process."""
    parts = [(f"{ME}:{name}", {"op": "dyt"}) for name in
             ("child_pid", "child_pid", "child_segfaults", "child_pid", "child_raises", "child_pid", "child_exits")]
    out = isolate.run_parts(parts)
    assert [o.ok for o in out] == [True, True, False, True, False, True, False]
    pids = [o.value for o in out]
    assert pids[0] == pids[1] and pids[3] == pids[5] and pids[0] != pids[3] and os.getpid() not in pids
    assert "SIGSEGV" in out[2].why() and "child_segfaults" in out[2].why()
    assert "raised RuntimeError" in out[4].why() and "status 3" in out[6].why()
    assert [o.failed for o in out] == [False, False, True, False, True, False, True]


def test_any_exit_status_is_the_part_s_own_and_each_part_runs_once(tmp_path):
    """An exit status (75 included) ends the part that exited, which ran once; the part
    before it stands; an unclean exit after the last result is laid on the last part."""
    runs = tmp_path / "runs.txt"
    out = isolate.run_parts([(f"{ME}:child_pid", {"op": "a"}),
                             (f"{ME}:child_exits_75_once", {"op": "b", "runs": str(runs)}),
                             (f"{ME}:child_pid", {"op": "c"}),
                             (f"{ME}:child_exits_7_at_the_end", {"op": "d"})])
    assert [o.failed for o in out] == [False, True, False, True]
    assert runs.read_text() == "ran\n" and "exited with status 75" in out[1].why()
    assert not out[0].lost_context and not out[1].lost_context
    assert out[3].ok and out[3].why().startswith("its process exited with status 7 after writing its result")
    assert out[2].value == out[3].value                # c and d shared the fresh child


def test_the_child_imports_the_parent_s_modules_not_the_working_directory_s(tmp_path, monkeypatch):
    """A stray tilefuse/ (or json.py) in the folder `tilefuse check` runs from is not what
    the child imports: it runs with the parent's import path only."""
    (tmp_path / "tilefuse").mkdir()
    (tmp_path / "tilefuse" / "__init__.py").write_text("raise ImportError('the working directory's tilefuse')\n")
    (tmp_path / "json.py").write_text("raise ImportError('the working directory's json')\n")
    monkeypatch.chdir(tmp_path)
    out = isolate.call(f"{ME}:child_returns", {"op": "dyt"})
    assert out.ok and out.value["op"] == "dyt", out.why()


def test_a_lost_context_ends_the_child_after_its_part_and_the_next_part_runs_fresh(monkeypatch):
    """The child's log says a CUDA launch failed after part 0 (it stops itself there): part 0
    keeps its rows and fails as a process, part 1 runs in a second child (the children faked:
    losing a context needs a GPU, test_an_illegal_memory_access... runs it there)."""
    calls = []

    def fake_child(parts, first, timeout):
        calls.append(first)
        if first == 0:
            return {"started": [0], "done": {0: {"value": ["rows of 0"]}}, "lost": 0}, 0, (), False
        return {"started": [1], "done": {1: {"value": ["rows of 1"]}}, "lost": None}, 0, (), False
    monkeypatch.setattr(isolate, "_run_child", fake_child)
    out = isolate.run_parts([("m:f", {}), ("m:f", {})])
    assert calls == [0, 1] and [o.value for o in out] == [["rows of 0"], ["rows of 1"]]
    assert out[0].ok and out[0].lost_context and out[0].failed and not out[1].failed
    assert "the CUDA context was lost" in out[0].why()


def test_a_log_line_cut_by_a_crash_is_not_a_result(tmp_path):
    """A record cut mid-write (even one that happens to end in a brace) is skipped, not fatal."""
    log = tmp_path / "log.jsonl"
    log.write_text('{"start": 0}\n{"index": 0, "value": 1}\n{"start": 1}\n{"index": 1, "value": {"a": 1}\n')
    assert isolate._read_log(log) == {"started": [0, 1], "done": {0: {"value": 1}}, "lost": None}


def test_a_part_past_its_timeout_is_stopped_and_says_where_it_waited():
    """A part still running after the timeout: its child dumps the part's frames (the main
    thread's, whatever other threads run) and ends; the next part runs in a fresh child."""
    import time
    t0 = time.perf_counter()
    out = isolate.run_parts([(f"{ME}:child_hangs", {"op": "dyt"}), (f"{ME}:child_pid", {"op": "dyt"})], timeout=3)
    assert time.perf_counter() - t0 < 60
    assert not out[0].ok and "still running after 3 s" in out[0].why()
    assert out[0].frames and "in child_hangs" in out[0].frames[0] and "threading.py" not in out[0].why()
    assert out[1].ok and not out[1].failed


def test_a_crashed_verification_is_a_failed_row_and_the_rest_run(tmp_path, monkeypatch):
    """so2's verification segfaults in its child: a failed row saying so and where, dyt's and
    grouped's verification (in their own children) still pass, the report is written. In
    process the same crash would end the whole check with no report."""
    monkeypatch.setattr(check, "verify_op", verify_so2_segfaults)
    result = check.run_check(tmp_path, quick=True, bench=False, show_progress=False, isolate=True)
    rows = result["verification"]
    assert [(r["op"], r["ok"]) for r in rows] == [("dyt", True), ("so2_mixing_stack", False),
                                                  ("grouped_glu_mlp", True)]
    assert rows[1]["path"] == "the verification section"
    assert "SIGSEGV" in rows[1]["detail"] and "verify_so2_segfaults" in rows[1]["detail"]
    assert rows[0]["detail"] != rows[2]["detail"]      # grouped's ran in a fresh process
    doc = json.loads((tmp_path / "report.json").read_text())
    assert [r["ok"] for r in doc["verification"]] == [True, False, True]
    assert "SIGSEGV" in (tmp_path / "report.md").read_text()


def test_a_crashed_benchmark_is_a_failed_row_and_the_rest_run(tmp_path, monkeypatch):
    """On a (faked) GPU, dyt's benchmark child segfaults: its benchmark entry says why, a
    failed row fails the check, and so2's benchmark ran in a process of its own."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(check, "benchmark_op", benchmark_dyt_segfaults)
    monkeypatch.setattr(check, "tuning_coverage", lambda ops: {"error": "not read in this test"})
    monkeypatch.setattr(check, "environment", lambda: {"ptxas": "-", "tilefuse": "-", "device": "a faked GPU",
                                                        "torch": "-", "triton": "-"})
    monkeypatch.setattr("tilefuse.check.report.write_markdown", lambda path, result: path.write_text("report\n"))
    result = check.run_check(tmp_path, quick=True, verify=False, show_progress=False, isolate=True,
                             ops=("dyt", "so2_mixing_stack"))
    assert "SIGSEGV" in result["benchmarks"]["dyt"]["skipped"]
    assert result["benchmarks"]["so2_mixing_stack"]["pid"] not in (os.getpid(), None)
    rows = result["verification"]
    assert [(r["op"], r["path"], r["ok"]) for r in rows] == [("dyt", "the benchmark section", False)]


def test_the_cli_isolates_by_default_and_in_process_on_request(tmp_path, monkeypatch):
    """`tilefuse check` and `tilefuse bench` run their parts in a child process unless
    --in-process is given (bench's refusal without CUDA faked away)."""
    seen = []

    def fake_run_check(out, **kw):
        seen.append((kw.get("verify", True), kw["isolate"], kw["part_timeout"]))
        (tmp_path / "report.md").write_text("report\n")
        return {"verification": []}
    monkeypatch.setattr(check, "run_check", fake_run_check)
    monkeypatch.setattr(check, "summary", lambda result, out: "")
    monkeypatch.setattr("tilefuse.cli._refusal", lambda args: None)
    for args in (["check", "--no-bench", "--ops", "dyt"], ["check", "--no-bench", "--in-process"],
                 ["bench"], ["bench", "--in-process"], ["check", "--part-timeout", "0"],
                 ["bench", "--part-timeout", "90"]):
        assert main([*args, "--out", str(tmp_path)]) == 0
    assert seen == [(True, True, 1800.0), (True, False, None), (False, True, 1800.0), (False, False, None),
                    (True, True, None), (False, True, 90.0)]


@pytest.mark.parametrize("args, says", [(["--part-timeout", "-1"], "0 (no limit) to 1e8 seconds"),
                                        (["--part-timeout", "nan"], "0 (no limit) to 1e8 seconds"),
                                        (["--part-timeout", "1e10"], "0 (no limit) to 1e8 seconds"),
                                        (["--part-timeout", "5", "--in-process"], "--in-process runs none")])
def test_part_timeout_usage_errors(tmp_path, capsys, args, says):
    out = tmp_path / "rep"
    with pytest.raises(SystemExit) as exc:
        main(["check", *args, "--out", str(out)])
    assert exc.value.code == 2 and says in capsys.readouterr().err and not out.exists()


def verify_loses_the_cuda_context(op, quick, device, show_progress):
    """A store far outside any allocation: the CUDA context is lost (a sticky error)."""
    import triton
    import triton.language as tl

    @triton.jit
    def _store_far(ptr):
        tl.store(ptr + (1 << 40), 1.0)
    x = torch.zeros(4, device="cuda")
    _store_far[(1,)](x)
    torch.cuda.synchronize()
    return [_row(op)]


def verify_runs_on_the_gpu(op, quick, device, show_progress):
    x = torch.arange(8.0, device="cuda")
    return [_row(op, ok=bool((x * 2).sum().item() == 56.0))]


def verify_lost_context_then_fresh(op, **kw):
    return (verify_loses_the_cuda_context if op == "dyt" else verify_runs_on_the_gpu)(op, **kw)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_an_illegal_memory_access_does_not_fail_the_parts_after_it(tmp_path, monkeypatch):
    """dyt's part loses its CUDA context to an out-of-bounds store; so2's part, in a fresh
    process, still runs on the GPU and passes (in one process every later launch would fail)."""
    monkeypatch.setattr(check, "verify_op", verify_lost_context_then_fresh)
    result = check.run_check(tmp_path, quick=True, bench=False, show_progress=False, isolate=True,
                             ops=("dyt", "so2_mixing_stack"))
    rows = result["verification"]
    assert [(r["op"], r["ok"]) for r in rows] == [("dyt", False), ("so2_mixing_stack", True)]
    assert "illegal memory access" in rows[0]["detail"] and "context was lost" in rows[0]["detail"]


def child_sleeps_after_saying_where(op, note, **kw):
    """Writes its pid and its work folder to ``note``, then sleeps."""
    import sys
    import time
    with open(note, "w") as f:
        json.dump({"pid": os.getpid(), "work": sys.argv[1]}, f)
    time.sleep(120)


def child_warns(op, **kw):
    import warnings
    warnings.warn("a warning from the child", RuntimeWarning)
    return 1


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, dead but not reaped by its own parent, counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _wait_for(predicate, seconds: float = 30.0) -> bool:
    import time
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.1)
    return predicate()


_PARENT = """
import sys
sys.path[:0] = {path!r}
import contextlib
from tilefuse import cli, isolate
with cli._exit_on_sigterm() if {handler!r} else contextlib.nullcontext():
    isolate.call("test_check_isolate:child_sleeps_after_saying_where", {{"op": "dyt", "note": {note!r}}})
"""


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="reads /proc (Linux)")
@pytest.mark.parametrize("signal_name, handler", [("SIGKILL", False), ("SIGTERM", False), ("SIGTERM", True)])
def test_a_child_does_not_outlive_its_parent(signal_name, handler, tmp_path):
    """The parent killed while its child runs a part (a job scheduler's SIGTERM, SIGKILL):
    the child ends too (before, it ran on, unread, holding the GPU). With the CLI's handler
    (check / bench with their child), SIGTERM ends the parent with status 143 after stopping
    the child and removing its work folder."""
    import signal
    import subprocess
    import sys
    note = tmp_path / "note.json"
    parent = subprocess.Popen([sys.executable, "-c", _PARENT.format(path=[p for p in sys.path if p],
                                                                    handler=handler, note=str(note))])
    try:
        assert _wait_for(lambda: note.exists() and note.stat().st_size > 0, 120), "the child never started its part"
        child = json.loads(note.read_text())
        assert _alive(child["pid"])
        parent.send_signal(getattr(signal, signal_name))
        status = parent.wait(60)
        assert _wait_for(lambda: not _alive(child["pid"])), "the child outlived its parent"
        if handler:
            assert status == 143 and not os.path.exists(child["work"])
        else:
            assert status == -getattr(signal, signal_name)
    finally:
        parent.kill()
        parent.wait()
        if note.exists():
            pid = json.loads(note.read_text())["pid"]
            if _alive(pid):
                os.kill(pid, 9)


def test_the_child_warns_as_the_parent_would(capfd):
    """The parent's warning filters reach the child: a warning this process ignores is not
    printed by a part either (the CLI hides numpy's warnings from Triton's interpreter; its
    children printed them)."""
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("default")
        assert isolate.call(f"{ME}:child_warns", {"op": "dyt"}).ok
        assert "a warning from the child" in capfd.readouterr().err
        warnings.filterwarnings("ignore", message="a warning from", category=RuntimeWarning)
        assert isolate.call(f"{ME}:child_warns", {"op": "dyt"}).ok
        assert "a warning from the child" not in capfd.readouterr().err


def test_the_cli_handles_sigterm_only_while_it_runs_and_only_from_the_main_thread(tmp_path, monkeypatch):
    """check / bench with their child turn SIGTERM into an exit while they run, then give the
    caller's handler back (main may be embedded); called from another thread (where Python
    takes no signal handler) they run without one instead of raising ValueError."""
    import signal
    import threading
    seen = []

    def fake_run_check(out, **kw):
        seen.append(signal.getsignal(signal.SIGTERM))
        return {"verification": []}
    monkeypatch.setattr(check, "run_check", fake_run_check)
    monkeypatch.setattr(check, "summary", lambda result, out: "")
    monkeypatch.setattr("tilefuse.cli._refusal", lambda args: None)
    mine = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        assert main(["check", "--no-bench", "--ops", "dyt", "--out", str(tmp_path)]) == 0
        assert seen[-1] not in (signal.SIG_IGN, signal.SIG_DFL) and callable(seen[-1])   # the CLI's, while it ran
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN                         # the caller's, after
        out = []
        worker = threading.Thread(target=lambda: out.append(
            main(["check", "--no-bench", "--ops", "dyt", "--out", str(tmp_path)])))
        worker.start()
        worker.join()
        assert out == [0] and seen[-1] is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGTERM, mine)
