"""The tuning table against hostile or foreign files and bad arguments: whatever lies at the
cache path is reported and ignored (never a crash, never a hang), configs are type-checked
from files and at registration, writes keep the entries of families the writer does not know,
`tilefuse tune --show` survives hand-edited entries, and every public entry point names the
argument it rejects."""

import dataclasses
import json
import os
import subprocess
import sys
import threading
import time
import warnings

import pytest
import torch

import tilefuse
from tilefuse import cli, tuning
from tilefuse.ops.dyt import configs as dyt_configs
from tilefuse.ops.dyt.configs import DyTConfig, DyTProblem
from tilefuse.ops.grouped_glu_mlp import tune as grouped_tune
from tilefuse.ops.so2_mixing_stack.configs import So2Config
from tilefuse.tuning import BASELINE, TILE, TableWarning, TuningFamily, store, table

pytestmark = pytest.mark.usefixtures("tuning_table")

PROBLEM = DyTProblem("fwd", 50, 32, 4, False)          # key fwd-M64-N32-x4
KEY = "fwd-M64-N32-x4"
A = DyTConfig(16, 32, 2, 4)
B = DyTConfig(32, 32, 2, 4)
SO2_KEY = "L3-C32-x4"
SO2_RELAY = So2Config(64, 64, 32, 4, 2)                 # a relay candidate of L3-C32-x4
SO2_FUSED = So2Config(16, 64, 32, 4, 1, True)           # a fused candidate of L3-C32-x4


@pytest.fixture(autouse=True)
def _fresh_reports():
    """Reports are once per message per process: each test sees its own."""
    store._reported.clear()
    yield
    store._reported.clear()


def fingerprint():
    return tuning.table_location()[0]


def cache_file():
    return tuning.table_location()[1]


def raw(winner, measured=None):
    return {"winner": winner if winner == BASELINE else dataclasses.asdict(winner),
            "measured": {} if measured is None else measured}


def document(families, **override):
    doc = {"schema": store.SCHEMA, "fingerprint": fingerprint(), "families": families}
    doc.update(override)
    return doc


def write_cache(content) -> None:
    path = cache_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, dict):
        content = json.dumps(content)
    if isinstance(content, str):
        content = content.encode()
    path.write_bytes(content)
    tuning.reload()


def on_disk():
    return json.loads(cache_file().read_text())["families"]


DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def run_dyt_at_level_2():
    """A real op call at level 2 (on the GPU, or Triton's interpreter on the CPU): it consults
    the table. On a GPU machine CPU tensors would run the reference and never read the table."""
    x = torch.randn(50, 32, device=DEVICE)
    alpha, w, b = (torch.tensor([0.7], device=DEVICE), torch.randn(32, device=DEVICE),
                   torch.randn(32, device=DEVICE))
    with tilefuse.level(2):
        return tilefuse.dyt(x, alpha, w, b)


def nested(depth):
    value = 1
    for _ in range(depth):
        value = [value]
    return value


# --- 1. unusable files: reported (naming the file and why) and ignored ------------------

UNUSABLE = {
    # name: (file content, what the report says)
    "deeply-nested": ("[" * 100000, "nested"),
    "deeply-nested-object": ('{"a":' * 100000, "nested"),
    "too-deep-inside-a-table": (lambda: document({"dyt": {KEY: raw(A, {"note": nested(200)})}}), "nested deeper"),
    "not-utf8": (b'{"schema": 1, "x": "\xff\xfe"}', "UTF-8"),
    "bad-json": ("{not json", "not valid JSON"),
    "huge-integer": ('{"schema": 1' + "0" * 5000 + "}", "not valid JSON"),
    "schema-a-string": (lambda: document({"dyt": {KEY: raw(A)}}, schema=str(store.SCHEMA)), "schema"),
    "families-a-list": (lambda: document([["dyt", {KEY: raw(A)}]]), "'families'"),
}


@pytest.mark.parametrize("kind", list(UNUSABLE))
def test_an_unusable_cache_file_is_reported_and_ignored_by_op_calls_and_show(kind, capsys):
    content, why = UNUSABLE[kind]
    write_cache(content() if callable(content) else content)
    with pytest.warns(TableWarning, match="ignored") as caught:
        y = run_dyt_at_level_2()
    assert torch.isfinite(y).all()
    assert any(str(cache_file()) in str(w.message) and why in str(w.message) for w in caught), \
        [str(w.message) for w in caught]
    assert tuning.get_entry("dyt", KEY) is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run_dyt_at_level_2()                                     # reported once, then quiet

    tuning.reload()
    assert cli.main(["tune", "--show"]) == 0
    assert "no entries" in capsys.readouterr().out

    with pytest.warns(TableWarning, match="moved to"):
        table.record("dyt", {KEY: raw(B)})                       # the next write starts afresh
    assert tuning.lookup_config("dyt", PROBLEM) == B
    assert on_disk()["dyt"][KEY]["winner"] == dataclasses.asdict(B)


def test_a_directory_at_the_cache_path_is_reported_and_ignored():
    cache_file().mkdir(parents=True)
    tuning.reload()
    with pytest.warns(TableWarning, match="a directory, not a regular file"):
        run_dyt_at_level_2()
    assert tuning.entries() == []


def test_an_unreadable_cache_file_is_reported_and_ignored(monkeypatch):
    write_cache(document({"dyt": {KEY: raw(A)}}))
    path = cache_file()
    with monkeypatch.context() as patch:
        if os.geteuid() != 0:
            path.chmod(0)
        else:   # root reads files whatever their permissions: refuse the open as the kernel would
            real_open = os.open

            def refusing_open(file, flags, *args, **kwargs):
                if os.fspath(file) == str(path):
                    raise PermissionError(13, "Permission denied", str(path))
                return real_open(file, flags, *args, **kwargs)
            patch.setattr(os, "open", refusing_open)
        try:
            tuning.reload()
            with pytest.warns(TableWarning, match="cannot be opened: Permission denied"):
                assert tuning.lookup_config("dyt", PROBLEM) is None
        finally:
            path.chmod(0o600)


def _unblock_if_stuck(path, done: threading.Event, after_s: float):
    """If the test is still blocked in an open() of FIFO ``path`` after ``after_s``, open the
    writing end (and close it): the blocked reader sees end-of-file and the test fails instead
    of hanging."""
    def run():
        if not done.wait(after_s):
            fd = os.open(path, os.O_WRONLY)
            os.close(fd)
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_a_fifo_at_the_cache_path_neither_hangs_nor_is_read():
    path = cache_file()
    path.parent.mkdir(parents=True)
    os.mkfifo(path)
    os.mkfifo(str(path) + ".lock")                   # the lock path too: must not hang either
    tuning.reload()
    done = threading.Event()
    thread = _unblock_if_stuck(path, done, after_s=5.0)
    start = time.monotonic()
    try:
        with pytest.warns(TableWarning, match="FIFO") as caught:
            assert tuning.lookup_config("dyt", PROBLEM) is None
        with pytest.warns(TableWarning, match="moved to") as moved:
            table.record("dyt", {KEY: raw(A)})
        # the FIFO at the lock path is moved aside too (filelock versions differ on a FIFO
        # lock: some lock it, some fail with EINVAL truncating it)
        assert any(f"{path}.lock was unusable (a FIFO (named pipe) at the lock path)" in str(w.message)
                   for w in moved), [str(w.message) for w in moved]
    finally:
        done.set()
        thread.join()
    assert time.monotonic() - start < 5.0, "blocked on the FIFO"
    assert any(str(path) in str(w.message) for w in caught)
    assert on_disk()["dyt"][KEY]["winner"] == dataclasses.asdict(A)
    assert tuning.lookup_config("dyt", PROBLEM) == A


def test_a_builtin_table_that_is_not_a_regular_file_is_reported(tmp_path, monkeypatch):
    folder = tmp_path / "fifo-builtin"
    folder.mkdir()
    monkeypatch.setattr(store, "builtin_dir", lambda: folder)
    fifo = folder / store.builtin_name(fingerprint())
    os.mkfifo(fifo)
    tuning.reload()
    done = threading.Event()
    thread = _unblock_if_stuck(fifo, done, after_s=5.0)
    try:
        with pytest.warns(TableWarning, match="FIFO"):
            assert tuning.lookup_config("dyt", PROBLEM) is None
    finally:
        done.set()
        thread.join()


# --- 2. configs are type-checked: from files and at registration ---------------------------

def test_ill_typed_config_fields_in_a_file_are_reported_and_only_that_entry_ignored():
    n512 = "fwd-M64-N512-x4"
    dyt_entries = {
        KEY: raw(A),                                                              # kept
        n512: {"winner": {"block_m": True, "block_n": 512, "num_warps": 2, "programs_per_sm": 4,
                          "prefetch": False}},
        "fwd-M128-N32-x4": {"winner": {**dataclasses.asdict(A), "block_m": 16.0}},
    }
    so2_entries = {
        SO2_KEY: {"winner": {**dataclasses.asdict(SO2_RELAY), "block_m": 64.0}},
        "L2-C32-x4": {"winner": {**dataclasses.asdict(SO2_FUSED), "fused": 1}},
        "L1-C32-x4": raw(So2Config(64, 64, 32, 4, 2)),                           # kept
    }
    assert DyTConfig(1, 512, 2, 4) in dyt_configs.candidates(DyTProblem("fwd", 64, 512, 4, False))
    write_cache(document({"dyt": dyt_entries, "so2_mixing_stack": so2_entries}))
    with pytest.warns(TableWarning) as caught:
        assert tuning.get_entry("dyt", KEY) == A
    messages = " | ".join(str(w.message) for w in caught)
    for field in ("DyTConfig.block_m must be int, got True (bool)",
                  "DyTConfig.block_m must be int, got 16.0 (float)",
                  "So2Config.block_m must be int, got 64.0 (float)",
                  "So2Config.fused must be bool, got 1 (int)"):
        assert field in messages, messages
    assert len(caught) == 4
    assert tuning.get_entry("dyt", n512) is None and tuning.get_entry("so2_mixing_stack", SO2_KEY) is None
    assert tuning.get_entry("so2_mixing_stack", "L2-C32-x4") is None
    assert tuning.get_entry("so2_mixing_stack", "L1-C32-x4") == So2Config(64, 64, 32, 4, 2)


def test_ill_typed_configs_are_rejected_at_registration_naming_the_field():
    cases = [
        ("so2_mixing_stack", SO2_KEY, dataclasses.replace(SO2_RELAY, block_m=64.0), "So2Config.block_m"),
        ("so2_mixing_stack", SO2_KEY, {**dataclasses.asdict(SO2_FUSED), "fused": 1}, "So2Config.fused"),
        ("dyt", "fwd-M64-N512-x4", {"block_m": True, "block_n": 512, "num_warps": 2, "programs_per_sm": 4,
                                    "prefetch": False}, "DyTConfig.block_m"),
        ("dyt", KEY, {**dataclasses.asdict(A), "num_warps": 2.0}, "DyTConfig.num_warps"),
    ]
    grouped_key = "H2048-F1408-E64-x2-T32768-swiglu-s32"
    fused = grouped_tune.FAMILY.candidates(grouped_tune.FAMILY.problem_for_key(grouped_key))[0]
    cases.append(("grouped_glu_mlp", grouped_key,
                  dataclasses.replace(fused, block_k=float(fused.block_k)), "GemmConfig.block_k"))
    for family, key, value, field in cases:
        with pytest.raises(TypeError, match=field):
            tuning.register(family, {key: value})
        assert tuning.get_entry(family, key) is None
    tuning.register("so2_mixing_stack", {SO2_KEY: SO2_RELAY})                 # well typed: fine
    assert tuning.get_entry("so2_mixing_stack", SO2_KEY) == SO2_RELAY


@dataclasses.dataclass(frozen=True)
class FakeProblem:
    n: int


@dataclasses.dataclass(frozen=True)
class FakeConfig:
    tile: int
    scale: float = 1.0
    mode: str | None = None
    fused: bool = False

    @property
    def name(self):
        return f"t{self.tile}"


class FakeFamily(TuningFamily):
    """A family the tests register (and other processes do not know); nothing runs."""

    name = "robustness_fake"
    source_files = ()
    config_class = FakeConfig

    def key(self, problem):
        return f"n{problem.n}"

    def problem_for_key(self, key):
        if not (isinstance(key, str) and key.startswith("n") and key[1:].isdigit()):
            raise ValueError(f"not a robustness_fake key: {key!r}")
        return FakeProblem(int(key[1:]))

    def is_valid(self, key, config):
        return True

    def baseline(self, problem):
        return FakeConfig(64)

    def candidates(self, problem):
        return [FakeConfig(32)]

    def change(self, config):
        return TILE

    def complexity(self, config):
        return (config.tile,)

    def make_inputs(self, problem, device, seed):
        raise NotImplementedError

    def input_bytes(self, problem):
        return 0

    def run(self, problem, choice, inputs):
        raise NotImplementedError

    def expected_launches(self, problem, choice):
        return ()

    def compare(self, problem, inputs, got, want):
        return []

    def default_problems(self):
        return []

    def problems_from_cli(self, shape, dtype, pass_):
        return []


@pytest.fixture
def fake_family():
    tuning.register_family(FakeFamily())
    yield "robustness_fake"
    tuning.unregister("robustness_fake")
    tuning.unregister_family("robustness_fake")
    tuning.reload()


def test_unregister_family_forgets_its_lookups_and_registrations(fake_family):
    """After unregister_family no lookup of the family answers from the memo (it is unknown
    again) and its runtime registrations are gone when it comes back."""
    good = {"tile": 32, "scale": 2, "mode": None, "fused": False}
    tuning.register(fake_family, {"n1": good})
    problem = FakeFamily().problem_for_key("n1")
    assert tuning.lookup_config(fake_family, problem) == FakeConfig(32, 2, None, False)   # memoised
    generation = tuning.table.generation()
    tuning.unregister_family(fake_family)
    assert tuning.table.generation() > generation
    with pytest.raises(ValueError, match="robustness_fake"):
        tuning.lookup_config(fake_family, problem)
    tuning.register_family(FakeFamily())
    assert tuning.lookup_config(fake_family, problem) is None and tuning.get_entry(fake_family, "n1") is None


def test_the_generic_type_check_follows_the_dataclass_annotations(fake_family):
    good = {"tile": 32, "scale": 2, "mode": None, "fused": False}      # an int is a float
    tuning.register(fake_family, {"n1": good, "n2": {**good, "scale": 0.5, "mode": "x"}})
    assert tuning.get_entry(fake_family, "n1") == FakeConfig(32, 2, None, False)
    for field, bad in (("tile", 32.0), ("tile", True), ("tile", "32"), ("scale", True),
                       ("scale", "1"), ("mode", 3), ("fused", 0), ("fused", None)):
        with pytest.raises(TypeError, match=f"FakeConfig.{field} must be"):
            tuning.register(fake_family, {"n3": {**good, field: bad}})
    assert tuning.get_entry(fake_family, "n3") is None


# --- 3. writes keep the entries of families the writer does not know ----------------------

_WRITER_B = """
import json, sys
from tilefuse.tuning import family, table
assert "robustness_fake" not in family.family_names()
table.record("dyt", {sys.argv[1]: json.loads(sys.argv[2])})
"""


def test_a_writer_that_does_not_know_a_family_keeps_its_entries(fake_family):
    # Process A (this one) knows the family and records an entry of it.
    foreign = {"winner": {"tile": 32, "scale": 1.0, "mode": None, "fused": False},
               "measured": {"speedup": 1.2, "spread": [1.1, 1.3], "note": "kept as is"}}
    table.record(fake_family, {"n8": foreign})
    # Process B never registered it: it records a dyt entry into the same file.
    env = dict(os.environ, TILEFUSE_CACHE_DIR=os.environ["TILEFUSE_CACHE_DIR"])
    out = subprocess.run([sys.executable, "-c", _WRITER_B, KEY, json.dumps(raw(A))], env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "robustness_fake" in out.stderr and "not used" in out.stderr     # B reported, kept
    families = on_disk()
    assert families["robustness_fake"] == {"n8": foreign}                   # untouched
    assert families["dyt"][KEY] == raw(A)
    tuning.reload()
    assert tuning.get_entry(fake_family, "n8") == FakeConfig(32)
    assert tuning.get_entry("dyt", KEY) == A


def test_a_family_unknown_in_this_process_round_trips_through_every_write(fake_family):
    table.record(fake_family, {"n8": raw(FakeConfig(32)), "n9": raw(BASELINE)})
    kept = on_disk()[fake_family]
    # This process forgets the family (as a process that never registered it), reloads, writes.
    tuning.unregister_family(fake_family)
    tuning.reload()
    with pytest.warns(TableWarning, match="robustness_fake"):
        table.record("dyt", {KEY: raw(A)})
    table.record("dyt", {"fwd-M128-N32-x4": raw(BASELINE)})
    assert on_disk()[fake_family] == kept
    assert set(on_disk()["dyt"]) == {KEY, "fwd-M128-N32-x4"}
    # Registering the family again makes the file's entries visible (the files are re-read).
    tuning.register_family(FakeFamily())
    assert tuning.get_entry(fake_family, "n8") == FakeConfig(32)
    assert tuning.get_entry(fake_family, "n9") == BASELINE


# --- 4. `tilefuse tune --show` with hand-edited `measured` fields -----------------------

def test_show_reports_bad_measured_fields_and_shows_the_rest(capsys):
    write_cache(document({"dyt": {
        KEY: raw(A, {"speedup": "fast", "spread": {"lo": 1}, "wall_s": 2.5}),
        "fwd-M128-N32-x4": raw(B, "quick"),
        "fwd-M256-N32-x4": raw(BASELINE, {"speedup": 1.05, "spread": [1.01, 1.2], "wall_s": 3.5,
                                          "timed": True}),
    }}))
    with pytest.warns(TableWarning) as caught:
        assert cli.main(["tune", "--show"]) == 0
    out = capsys.readouterr().out
    messages = " | ".join(str(w.message) for w in caught)
    for bad in ("'speedup' must be a number, got 'fast'", "'spread' must be a list of two numbers",
                "'measured' must be an object, got 'quick'", "'timed' must be a count, got True"):
        assert bad in messages, messages
    rows = {line.split()[1]: line for line in out.splitlines() if line.startswith("dyt ")}
    assert set(rows) == {KEY, "fwd-M128-N32-x4", "fwd-M256-N32-x4"}, out
    assert A.name in rows[KEY] and "2.5" in rows[KEY]                       # the good fields stay
    assert B.name in rows["fwd-M128-N32-x4"]
    assert "1.050x [1.010-1.200]" in rows["fwd-M256-N32-x4"] and "3.5" in rows["fwd-M256-N32-x4"]
    assert tuning.lookup_config("dyt", PROBLEM) == A                         # the winners are used


def test_measured_fields_are_checked_when_recording():
    with pytest.raises(ValueError, match="record: updates.*'speedup' must be a number"):
        table.record("dyt", {KEY: raw(A, {"speedup": "fast"})})
    assert not cache_file().exists()


# --- 6. every public entry point names the bad argument ----------------------------------

def test_register_names_a_bad_key_or_value():
    with pytest.raises(TypeError, match=r"register\('dyt'\): key 123 must be a dyt key \(str\) or a dyt problem, "
                                        r"got 123 \(int\)$"):   # no AttributeError of the family's key()
        tuning.register("dyt", {123: BASELINE})
    with pytest.raises(TypeError, match=r"register\(family, mapping\): mapping is missing \(the family name comes first\)"):
        tuning.register({123: BASELINE})                # the call: one argument, a dict
    with pytest.raises(ValueError, match=r"register\('dyt'\): key 'fwd-M100-N32-x4'.*not a dyt key"):
        tuning.register("dyt", {"fwd-M100-N32-x4": BASELINE})
    with pytest.raises(ValueError, match=r"key 'fwd-M64-N32-x4': the value must be 'baseline'.*'fused'"):
        tuning.register("dyt", {KEY: "fused"})
    with pytest.raises(TypeError, match=r"key 'fwd-M64-N32-x4': the value must be .*DyTConfig.*So2Config"):
        tuning.register("dyt", {KEY: SO2_RELAY})
    with pytest.raises(TypeError, match=r"key 'fwd-M64-N32-x4': the value must be .*got 7 \(int\)"):
        tuning.register("dyt", {KEY: 7})
    with pytest.raises(TypeError, match="register: family must be a tuning family name"):
        tuning.register({123: BASELINE}, {})
    with pytest.raises(TypeError, match="register: mapping must be a dict"):
        tuning.register("dyt", [(KEY, BASELINE)])
    assert tuning.entries() == []                      # nothing half-installed


def test_registered_puts_back_what_was_registered_before():
    """tuning.registered holds runtime entries for a block and then restores those keys:
    a user's earlier registration comes back, a key that had none has none, also when the block
    raises; bad arguments raise before anything changes."""
    other = "fwd-M128-N32-x4"
    tuning.register("dyt", {KEY: A})
    with tuning.registered("dyt", {PROBLEM: B, other: BASELINE}):
        assert tuning.lookup_config("dyt", PROBLEM) == B
        assert tuning.get_entry("dyt", other) == BASELINE
    assert tuning.lookup_config("dyt", PROBLEM) == A
    assert tuning.get_entry("dyt", other) is None
    with pytest.raises(RuntimeError, match="inside"):
        with tuning.registered("dyt", {KEY: B}):
            raise RuntimeError("inside")
    assert tuning.lookup_config("dyt", PROBLEM) == A
    for bad, error, message in (({123: BASELINE}, TypeError, r"registered: mapping key must be a dyt key \(str\) or a dyt problem, got 123 \(int\)"),
                                ({KEY: 7}, TypeError, r"key 'fwd-M64-N32-x4': the value must be .*got 7 \(int\)"),
                                (None, TypeError, r"register\(family, mapping\): mapping is missing")):
        with pytest.raises(error, match=message):
            with tuning.registered("dyt", bad):
                raise AssertionError("the block must not run")
        assert tuning.lookup_config("dyt", PROBLEM) == A
    tuning.unregister("dyt")
    with tuning.registered("dyt", {KEY: B}):
        assert tuning.lookup_config("dyt", PROBLEM) == B
    assert tuning.get_entry("dyt", KEY) is None


def test_registered_blocks_on_one_key_may_close_in_any_order():
    """Two registered() blocks on one key that overlap rather than nest (as two threads' blocks
    do) and close oldest first: the key keeps the open block's entry, and after the last one
    the entry from before the first comes back (the earlier implementation restored, at the
    second close, the entry the first block had installed: a stale registration for good).
    Then the same with two threads, and nesting as before."""
    tuning.register("dyt", {KEY: A})
    first, second = tuning.registered("dyt", {KEY: B}), tuning.registered("dyt", {KEY: BASELINE})
    first.__enter__()
    second.__enter__()
    assert tuning.get_entry("dyt", KEY) == BASELINE
    first.__exit__(None, None, None)
    assert tuning.get_entry("dyt", KEY) == BASELINE        # the open block's entry
    second.__exit__(None, None, None)
    assert tuning.lookup_config("dyt", PROBLEM) == A       # the entry from before the first
    tuning.unregister("dyt")

    entered, first_left, seen = threading.Event(), threading.Event(), []

    def other():
        with tuning.registered("dyt", {KEY: B}):
            entered.set()
            first_left.wait(5)
            seen.append(tuning.lookup_config("dyt", PROBLEM))
    worker = threading.Thread(target=other)
    with tuning.registered("dyt", {KEY: A}):
        worker.start()
        assert entered.wait(5)
    first_left.set()
    worker.join(5)
    assert seen == [B] and tuning.get_entry("dyt", KEY) is None
    with tuning.registered("dyt", {KEY: A}):
        with tuning.registered("dyt", {PROBLEM: B}):
            assert tuning.lookup_config("dyt", PROBLEM) == B
        assert tuning.lookup_config("dyt", PROBLEM) == A
    assert tuning.get_entry("dyt", KEY) is None


def test_every_entry_point_names_a_bad_family_key_or_problem():
    problem_error = "must be a dyt key \\(str\\) or a dyt problem, got 123 \\(int\\)"
    cases = [
        (lambda: tuning.get_entry("dyt", 123), TypeError, "get_entry: key_or_problem " + problem_error),
        (lambda: tuning.get_entry("dyt", "nope"), ValueError, "get_entry: key_or_problem: not a dyt key"),
        (lambda: tuning.get_entry(["dyt"], KEY), TypeError, "get_entry: family must be a tuning family name"),
        (lambda: tuning.is_covered("dyt", 123), TypeError, "is_covered: key_or_problem " + problem_error),
        (lambda: tuning.is_covered(7, KEY), TypeError, "is_covered: family must be a tuning family name"),
        (lambda: tuning.lookup_config("dyt", 123), TypeError, "lookup_config: problem " + problem_error),
        (lambda: tuning.lookup_config("dyt", KEY), TypeError, "lookup_config: problem must be a dyt problem"),
        (lambda: tuning.lookup_config("dyt", [1]), TypeError, "lookup_config: problem"),
        (lambda: tuning.lookup_config({"dyt"}, PROBLEM), TypeError, "lookup_config: family must be"),
        (lambda: tuning.unregister("dyt", KEY), TypeError, "unregister: keys must be None or a list"),
        (lambda: tuning.unregister("dyt", [123]), TypeError, "unregister: keys " + problem_error),
        (lambda: tuning.unregister(None), TypeError, "unregister: family must be"),
        (lambda: tuning.sweep_key("dyt", 123), TypeError, "sweep_key: key_or_problem " + problem_error),
        (lambda: tuning.sweep_key("dyt", "nope"), ValueError, "sweep_key: key_or_problem: not a dyt key"),
        (lambda: tuning.sweep_key(3, KEY), TypeError, "sweep_key: family must be"),
        (lambda: tuning.entries("0"), TypeError, "entries: device_index must be an int"),
        (lambda: tuning.table_location(True), TypeError, "table_location: device_index must be an int"),
        (lambda: tuning.table_location(99), ValueError, "table_location: device_index must be -1"),
        (lambda: table.record("dyt", {123: raw(A)}), TypeError, "record: updates: cannot record dyt/123"),
        (lambda: table.record("dyt", [KEY]), TypeError, "record: updates must be a dict"),
        (lambda: tuning.get_family(123), TypeError, "family must be a tuning family name"),
        (lambda: tuning.unregister_family(123), TypeError, "unregister_family: name must be"),
        (lambda: tuning.register_family("dyt"), TypeError, "register_family: family must be a TuningFamily"),
    ]
    for call, kind, message in cases:
        with pytest.raises(kind, match=message):
            call()
    assert tuning.get_entry("dyt", PROBLEM) is None and tuning.get_entry("dyt", KEY) is None


@pytest.mark.parametrize("name", ["dyt", "so2_mixing_stack", "grouped_glu_mlp"])
def test_a_family_cannot_take_a_builtins_name_before_it_loads(name):
    """Built-in families load on first use; a family registered under a built-in's name before
    then would have replaced it for every later call (ValueError whatever loaded first)."""
    import copy
    from tilefuse.tuning import family as fam
    saved = fam._families.pop(name, None)       # as in a fresh process: not loaded yet
    try:
        impostor = copy.copy(tuning.get_family("dyt" if name != "dyt" else "so2_mixing_stack"))
        fam._families.pop(name, None)
        impostor.name = name
        with pytest.raises(ValueError, match=f"built-in tuning family named '{name}' is already registered"):
            tuning.register_family(impostor)
        assert tuning.get_family(name) is not impostor
        tuning.register_family(tuning.get_family(name))       # the built-in itself: accepted
    finally:
        if saved is not None:
            fam._families[name] = saved


def test_the_cache_fingerprint_hashes_what_a_measurement_depends_on():
    """Each shipped family's source_files (store.kernel_source_hash: a change starts a fresh
    cache file) exist and hold its kernels, launch, tune (candidates, tolerances) and the
    shared modules its launches go through; grouped_glu_mlp's also the quantizers its
    recipes run."""
    from pathlib import Path
    from tilefuse.tuning import get_family
    from tilefuse.tuning.store import BUILTIN_FAMILIES
    for name in BUILTIN_FAMILIES:
        files = [Path(p) for p in get_family(name).source_files]
        assert all(p.is_file() for p in files), name
        names = {f"{p.parent.name}/{p.name}" for p in files}
        op = {"dyt": "dyt", "so2_mixing_stack": "so2_mixing_stack", "grouped_glu_mlp": "grouped_glu_mlp"}[name]
        assert {f"{op}/kernels.py", f"{op}/launch.py", f"{op}/tune.py", "ops/triton_common.py"} <= names, name
    grouped = {f"{Path(p).parent.name}/{Path(p).name}" for p in get_family("grouped_glu_mlp").source_files}
    # the quantizers, the format constants they compile in (E4M3_MAX, ...) and the scale layout
    assert {"quant/kernels.py", "quant/launch.py", "quant/formats.py", "quant/swizzle.py",
            "grouped_glu_mlp/recipes.py"} <= grouped
    assert "so2_mixing_stack/compose.py" in {f"{Path(p).parent.name}/{Path(p).name}"
                                             for p in get_family("so2_mixing_stack").source_files}


def test_keys_not_written_as_the_family_writes_them_are_refused():
    """A key that parses but is not the family's form (leading zeros; a grouped token count
    that is not a power-of-two bucket) would hold an entry no call ever looks up: register
    refuses it by name, and is_covered too."""
    good = {"block_m": 64, "block_n": 32, "num_warps": 4, "programs_per_sm": 4}
    for family, key in (("dyt", "fwd-M064-N32-x4"), ("so2_mixing_stack", "L03-C32-x4"),
                        ("grouped_glu_mlp", "H2048-F1408-E64-x2-T100-swiglu-s32")):
        with pytest.raises(ValueError, match="key"):
            tuning.is_covered(family, key)
    with pytest.raises(ValueError, match="as the family writes it"):
        tuning.register("dyt", {"fwd-M064-N32-x4": good})
    assert tuning.get_entry("dyt", "fwd-M64-N32-x4") is None


# --- 4. a file this process cannot open is left alone; where the cache folder is -------------

def _refuse(patch, path, error, at):
    """Make this process fail to open (``at="open"``) or to read (``at="read"``) ``path`` with
    ``error``, as a file of another user's (EACCES), a process out of descriptors (EMFILE) or
    a failing disk (EIO) would; every other file opens and reads as usual."""
    real_open, real_read, fds = os.open, os.read, set()

    def open_(file, flags, *args, **kwargs):
        if os.fspath(file) == str(path):
            if at == "open":
                raise error
            fd = real_open(file, flags, *args, **kwargs)
            fds.add(fd)
            return fd
        return real_open(file, flags, *args, **kwargs)

    def read_(fd, n):
        if fd in fds:
            raise error
        return real_read(fd, n)
    patch.setattr(os, "open", open_)
    patch.setattr(os, "read", read_)


@pytest.mark.parametrize("failure", ["EACCES-open", "EMFILE-open", "EIO-read"])
def test_a_cache_file_that_cannot_be_read_is_never_moved_aside_or_replaced(failure, monkeypatch):
    """Not being able to open or read a file says nothing about its content: a write fails
    (an OSError, which a sweep reports) and leaves the file as it is, where moving it aside
    and writing only the new entries would lose the whole table; a load reports and ignores
    it."""
    import errno
    name, at = failure.split("-")
    code = getattr(errno, name)
    write_cache(document({"dyt": {KEY: raw(A)}}))
    path = cache_file()
    before = path.read_bytes()
    with monkeypatch.context() as patch:
        _refuse(patch, path, OSError(code, os.strerror(code), str(path)), at)
        with pytest.raises(OSError, match="left as it is") as raised:
            table.record("dyt", {"fwd-M128-N32-x4": raw(B)})
        assert isinstance(raised.value, store.TableUnreadable)
        assert os.strerror(code) in str(raised.value) and str(path) in str(raised.value)
        tuning.reload()
        with pytest.warns(TableWarning, match=f"{path} ignored: .*{os.strerror(code)}"):
            assert tuning.lookup_config("dyt", PROBLEM) is None
    assert path.read_bytes() == before
    assert [p.name for p in path.parent.iterdir() if ".invalid-" in p.name] == []
    tuning.reload()
    assert tuning.get_entry("dyt", KEY) == A and tuning.get_entry("dyt", "fwd-M128-N32-x4") is None


def test_cache_dir_expands_the_user_and_is_absolute(tmp_path, monkeypatch):
    """``~`` in TILEFUSE_CACHE_DIR is the home folder, not a folder named ``~``, and a relative
    folder is taken from the working directory when the table is read: a later chdir does not
    move the table."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TILEFUSE_CACHE_DIR", "~/tfcache")
    assert store.cache_dir() == tmp_path / "home" / "tfcache"
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TILEFUSE_CACHE_DIR", "rel/cache")
    assert store.cache_dir() == tmp_path / "rel" / "cache"
    tuning.reload()
    assert cache_file().parent == tmp_path / "rel" / "cache"
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    table.record("dyt", {KEY: raw(A)})
    assert not (tmp_path / "elsewhere" / "rel").exists()
    assert json.loads(cache_file().read_text())["families"]["dyt"][KEY] == raw(A)
    assert cache_file().parent == tmp_path / "rel" / "cache"


@pytest.fixture
def homeless(tmp_path, monkeypatch):
    """A process with no home folder (HOME unset, its uid in no passwd database: Path.home()
    raises) and no TILEFUSE_CACHE_DIR, whose temp folder is ``tmp_path / "tmp"``."""
    from pathlib import Path

    def no_home():
        raise RuntimeError("Could not determine home directory.")
    monkeypatch.delenv("TILEFUSE_CACHE_DIR")
    monkeypatch.delenv("HOME", raising=False)
    monkeypatch.setattr(Path, "home", staticmethod(no_home))
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path / "tmp"))
    store._homeless_folder.cache_clear()
    store._homeless_cache_dir.cache_clear()
    tuning.reload()
    yield tmp_path / "tmp"
    store._homeless_folder.cache_clear()
    store._homeless_cache_dir.cache_clear()


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="per-uid folders")
def test_without_a_home_folder_the_tables_go_to_a_private_temp_folder(homeless):
    """Path.home() raising must not make every op call at level 2 crash: the cache lives in
    <tempdir>/tilefuse-<uid> (0700), said once, and sweeps record into it."""
    import stat as stat_
    folder = homeless / f"tilefuse-{os.getuid()}"
    with pytest.warns(TableWarning, match="no home folder.*TILEFUSE_CACHE_DIR"):
        y = run_dyt_at_level_2()
    assert torch.isfinite(y).all()
    assert cache_file().parent == folder
    assert stat_.S_IMODE(folder.stat().st_mode) & 0o077 == 0
    table.record("dyt", {KEY: raw(A)})
    assert json.loads(cache_file().read_text())["families"]["dyt"][KEY] == raw(A)
    tuning.reload()
    assert tuning.lookup_config("dyt", PROBLEM) == A


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="per-uid folders")
def test_a_homeless_fallback_folder_of_another_user_is_not_used(homeless, monkeypatch):
    """The temp folder is shared: a tilefuse-<uid> folder someone else made (here: made by
    this user for a uid this process pretends to be, so not its owner) is not the cache."""
    other = os.getuid() + 1
    planted = homeless / f"tilefuse-{other}"
    planted.mkdir()
    monkeypatch.setattr(os, "getuid", lambda: other)
    with pytest.warns(TableWarning, match="no home folder"):
        folder = store.cache_dir()
    assert folder != planted and folder.parent == homeless and folder.name.startswith(planted.name + "-")
    assert store.cache_dir() == folder                   # one folder for the whole process


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="per-uid folders")
def test_without_a_home_folder_a_tilde_in_the_cache_dir_is_the_fallback_folder(homeless, tmp_path, monkeypatch):
    """TILEFUSE_CACHE_DIR=~/... where os.path.expanduser finds no home folder (it leaves ``~``
    as it is): the path below <tempdir>/tilefuse-<uid>, said once, not below a folder named
    ``~`` in the working directory."""
    import warnings
    fallback = homeless / f"tilefuse-{os.getuid()}"
    monkeypatch.setattr(store.os.path, "expanduser", lambda path: path)   # as without a home folder
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TILEFUSE_CACHE_DIR", "~/tables/tf")
    with pytest.warns(TableWarning, match="no home folder.*TILEFUSE_CACHE_DIR's ~ is taken as"):
        assert store.cache_dir() == fallback / "tables" / "tf"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert store.cache_dir() == fallback / "tables" / "tf"
        tuning.reload()
        table.record("dyt", {KEY: raw(A)})
    assert cache_file().parent == fallback / "tables" / "tf"
    assert json.loads(cache_file().read_text())["families"]["dyt"][KEY] == raw(A)
    assert not (tmp_path / "~").exists()
    monkeypatch.setenv("TILEFUSE_CACHE_DIR", "~")
    with pytest.warns(TableWarning, match="no home folder"):
        assert store.cache_dir() == fallback


def test_a_folder_named_tilde_below_the_working_directory_is_taken_as_written(tmp_path, monkeypatch):
    """TILEFUSE_CACHE_DIR=./~/x names a folder ``~`` in the working directory (the home folder
    present): Path("./~/x").parts reads as ~/x, the string does not."""
    import warnings
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TILEFUSE_CACHE_DIR", "./~/tables")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert store.cache_dir() == tmp_path / "~" / "tables"


# --- 5. a registered family's sources: an edit makes its entries stale ------------------------

class SourcedFamily(FakeFamily):
    """FakeFamily with a source file of its own (given per instance)."""

    def __init__(self, source):
        self.source_files = (source,)


def test_a_registered_familys_entries_follow_its_source_files(tmp_path):
    """A registered family's source_files count as the built-ins' do, without touching the
    fingerprint (registering it keeps the cache file, so the built-ins' entries stay): an edit
    of them makes its entries unused (reported) and its next sweep replaces them; other
    families' writes keep them as they are meanwhile."""
    source = tmp_path / "fake_kernels.py"
    source.write_text("# v1\n")
    location = tuning.table_location()
    table.record("dyt", {KEY: raw(A)})
    tuning.register_family(SourcedFamily(source))
    try:
        assert tuning.table_location() == location
        table.record("robustness_fake", {"n8": raw(FakeConfig(32))})
        sources = json.loads(cache_file().read_text())["sources"]
        assert sources == {"robustness_fake": store.family_source_hash("robustness_fake")}
        tuning.reload()
        assert tuning.get_entry("robustness_fake", "n8") == FakeConfig(32)

        source.write_text("# v2: the kernel changed\n")
        tuning.reload()
        with pytest.warns(TableWarning, match="robustness_fake.*other source_files"):
            assert tuning.get_entry("robustness_fake", "n8") is None
        assert tuning.get_entry("dyt", KEY) == A
        table.record("dyt", {"fwd-M128-N32-x4": raw(B)})             # keeps them as they are
        doc = json.loads(cache_file().read_text())
        assert doc["families"]["robustness_fake"] == {"n8": raw(FakeConfig(32))}
        assert doc["sources"] == sources
        table.record("robustness_fake", {"n9": raw(BASELINE)})       # replaces them
        doc = json.loads(cache_file().read_text())
        assert doc["families"]["robustness_fake"] == {"n9": raw(BASELINE)}
        assert doc["sources"]["robustness_fake"] == store.family_source_hash("robustness_fake") \
            != sources["robustness_fake"]
        tuning.reload()
        assert tuning.get_entry("robustness_fake", "n9") == BASELINE
        assert tuning.get_entry("dyt", KEY) == A and tuning.get_entry("dyt", "fwd-M128-N32-x4") == B

        doc["sources"] = {}                   # entries whose sources were never recorded
        write_cache(doc)
        with pytest.warns(TableWarning, match="no hash of its source_files"):
            assert tuning.get_entry("robustness_fake", "n9") is None
        assert tuning.get_entry("dyt", KEY) == A
    finally:
        tuning.unregister("robustness_fake")
        tuning.unregister_family("robustness_fake")
        tuning.reload()


def test_overlapping_poisoned_blocks_in_two_threads_restore_the_settings():
    """Thread A opens, B opens, A closes, B looks, B closes, for the sweep's poisoned
    allocations and dyt's poisoned launches: B still has the setting after A closed, and the
    caller's settings are back after both (each saved and put back its own: B ran unpoisoned
    and left NaN-filling and deterministic mode on for good)."""
    from overlap import overlapping

    from tilefuse.ops.dyt import launch as dyt_launch
    from tilefuse.ops.dyt.verify import poisoned
    from tilefuse.tuning import sweep
    before = (torch.are_deterministic_algorithms_enabled(), torch.utils.deterministic.fill_uninitialized_memory)
    assert overlapping(sweep.poisoned_allocations, lambda: bool(torch.empty(4).isnan().all())) is True
    assert (torch.are_deterministic_algorithms_enabled(), torch.utils.deterministic.fill_uninitialized_memory) == before
    assert overlapping(poisoned, lambda: (dyt_launch.POISON_OUTPUTS, dyt_launch.POISON_SCRATCH)) == (True, True)
    assert (dyt_launch.POISON_OUTPUTS, dyt_launch.POISON_SCRATCH) == (False, False)


def test_collects_in_two_threads_run_their_backwards_each_at_its_own_level(monkeypatch):
    """model.collect raises the process-wide level for its backward (autograd's CUDA thread
    sees no level block): two threads collecting at levels 2 and 3 at once run their backwards
    one at a time, each seeing its own level, and the caller's set_level is back after both
    (a count of open backwards kept the first one's level for the second, and the level-3
    collect missed its backward keys)."""
    from tilefuse import policy
    from tilefuse.tuning import model
    seen, inside, release = {}, threading.Event(), threading.Event()

    def grad(*args, **kwargs):   # the backward: records the level it runs at
        name = threading.current_thread().name
        seen.setdefault(name, []).append(policy._global_level)
        if name == "a":
            inside.set()
            release.wait(5)      # b tries to start its backward meanwhile
        seen[name].append(policy._global_level)

    monkeypatch.setattr(model.torch.autograd, "grad", grad)
    layer = tilefuse.nn.DyT(4)
    x = torch.randn(2, 4)

    def run(level):
        with tilefuse.level(level):
            model.collect(layer, x)

    tilefuse.set_level(1)
    try:
        a = threading.Thread(target=run, args=(2,), name="a")
        b = threading.Thread(target=run, args=(3,), name="b")
        a.start()
        inside.wait(5)
        b.start()
        time.sleep(0.2)
        release.set()
        a.join(10)
        b.join(10)
        assert seen == {"a": [2, 2], "b": [3, 3]} and policy._global_level == 1
    finally:
        tilefuse.set_level(None)


def test_a_save_removes_the_temp_files_a_killed_writer_left(tmp_path):
    """A writer killed between its temp file and the rename leaves a whole copy of the table
    behind; the next save (under the lock every saving writer holds while its temp file
    exists) deletes such files and keeps every entry."""
    path = tmp_path / "table.json"
    fp, _ = table.table_location()
    orphans = [tmp_path / f"table.json.{tag}.tmp" for tag in ("abc123", "x_y")]
    for orphan in orphans:
        orphan.write_text("{}")
    other = tmp_path / "other.json.abc.tmp"            # another file's: not this table's
    other.write_text("{}")
    store.save(path, fp, {})
    assert not any(o.exists() for o in orphans) and other.exists() and path.exists()
