"""The tuning table: three-valued entries, lookup precedence, keys, and the files behind it
(validation of everything read, locked atomic merged writes, built-in tables)."""

import json
import multiprocessing
import os
import warnings

import pytest

import tilefuse
from tilefuse import tuning
from tilefuse.ops.dyt import configs, launch
from tilefuse.ops.dyt.configs import DyTConfig, DyTProblem
from tilefuse.ops.dyt.tune import FAMILY as DYT
from tilefuse.tuning import BASELINE, TableWarning, store, table

PROBLEM = DyTProblem("fwd", 50, 32, 4, False)          # key fwd-M64-N32-x4
KEY = "fwd-M64-N32-x4"
A = DyTConfig(16, 32, 2, 4)
B = DyTConfig(32, 32, 2, 4)
C = DyTConfig(16, 32, 4, 4)


@pytest.fixture(autouse=True)
def fresh_table(tmp_path, monkeypatch):
    """An empty cache folder and built-in folder per test; nothing registered."""
    monkeypatch.setenv("TILEFUSE_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "builtin").mkdir()
    monkeypatch.setattr(store, "builtin_dir", lambda: tmp_path / "builtin")
    store._reported.clear()
    tuning.reload()
    yield
    tuning.unregister("dyt")
    tuning.reload()


def fingerprint():
    return table.table_location()[0]


def cache_file():
    return table.table_location()[1]


def raw(winner):
    return {"winner": winner if winner == BASELINE else winner.to_dict(), "measured": {}}


def write_builtin(entries):
    fp = fingerprint()
    store.write_document(store.builtin_dir() / store.builtin_name(fp), fp, {"dyt": entries})
    tuning.reload()


def test_three_valued_entries_and_what_runs():
    heuristic = configs.heuristic(PROBLEM)
    assert tuning.get_entry("dyt", KEY) is None and not tuning.is_covered("dyt", PROBLEM)
    assert tuning.lookup_config("dyt", PROBLEM) is None
    with tilefuse.level(2):
        assert launch.pick_config(PROBLEM) == heuristic          # absent: the safe default

    tuning.register("dyt", {KEY: A})
    assert tuning.get_entry("dyt", PROBLEM) == A and tuning.lookup_config("dyt", PROBLEM) == A
    with tilefuse.level(2):
        assert launch.pick_config(PROBLEM) == A
    with tilefuse.level(1):
        assert launch.pick_config(PROBLEM) == heuristic          # level 1 never reads the table

    tuning.register("dyt", {PROBLEM: BASELINE})
    assert tuning.is_covered("dyt", KEY) and tuning.get_entry("dyt", KEY) == BASELINE
    assert tuning.lookup_config("dyt", PROBLEM) is None
    with tilefuse.level(2):
        assert launch.pick_config(PROBLEM) == heuristic


def test_precedence_runtime_then_cache_then_builtin():
    other = "fwd-M128-N32-x4"
    write_builtin({KEY: raw(A), other: raw(A)})
    assert tuning.lookup_config("dyt", PROBLEM) == A
    table.record("dyt", {KEY: raw(B)})
    assert tuning.lookup_config("dyt", PROBLEM) == B
    tuning.register("dyt", {KEY: C})
    assert tuning.lookup_config("dyt", PROBLEM) == C
    sources = {(k, src) for _, k, src, _ in tuning.entries()}
    assert (KEY, "runtime") in sources and (other, "builtin") in sources
    tuning.unregister("dyt", [KEY])
    assert tuning.lookup_config("dyt", PROBLEM) == B
    # A cached BASELINE hides a built-in config: swept here, the baseline won here.
    table.record("dyt", {KEY: raw(BASELINE)})
    assert tuning.lookup_config("dyt", PROBLEM) is None and tuning.is_covered("dyt", KEY)
    assert tuning.lookup_config("dyt", DYT.problem_for_key(other)) == A


def test_unknown_family_and_invalid_registrations_are_value_errors():
    for call in (lambda: tuning.lookup_config("nope", PROBLEM), lambda: tuning.is_covered("nope", KEY),
                 lambda: tuning.register("nope", {KEY: A})):
        with pytest.raises(ValueError, match="unknown tuning family 'nope'"):
            call()
    with pytest.raises(ValueError, match="not in the config space"):
        tuning.register("dyt", {KEY: DyTConfig(1, 64, 2, 4)})     # block_n beyond the row
    with pytest.raises(ValueError, match="not a dyt key"):
        tuning.register("dyt", {"fwd-M100-N32-x4": A})             # rows bucket not a power of 2
    with pytest.raises(ValueError):
        tuning.register("dyt", {KEY: {"block_m": 16, "block_n": 32, "num_warps": 2}})


def test_dyt_keys_bucket_rows_and_keep_what_changes_code():
    key = DYT.key
    assert key(DyTProblem("fwd", 1000, 64, 2, False)) == key(DyTProblem("fwd", 1024, 64, 2, False)) \
        == "fwd-M1024-N64-x2"
    assert key(DyTProblem("fwd", 1025, 64, 2, False)) == "fwd-M2048-N64-x2"
    assert key(DyTProblem("fwd", 1024, 65, 2, False)) != key(DyTProblem("fwd", 1024, 64, 2, False))
    assert key(DyTProblem("bwd", 1024, 64, 4, True)) == "bwd-M1024-N64-x4-cf"
    for k in ("bwd-M1024-N64-x4-cf", KEY):
        assert key(DYT.problem_for_key(k)) == k
    for bad in ("fwd-M64-N32", "up-M64-N32-x4", "fwd-M64-N32-x3", "fwd-M64-N0-x4", 7):
        with pytest.raises(ValueError):
            DYT.problem_for_key(bad)


def _doc(**override):
    doc = {"schema": store.SCHEMA, "fingerprint": fingerprint(), "families": {"dyt": {KEY: raw(A)}}}
    doc.update(override)
    return json.dumps(doc)


UNUSABLE = {
    "corrupt": lambda: "{not json",
    "truncated": lambda: _doc()[: len(_doc()) // 2],
    "foreign-schema": lambda: _doc(schema=99),
    "other-fingerprint": lambda: _doc(fingerprint={**fingerprint(), "torch": "0.0"}),
    "not-an-object": lambda: "[1, 2]",
    "null": lambda: "null",     # parses to None, which must not read as "no file"
    "families-not-objects": lambda: _doc(families={"dyt": [1]}),
}


@pytest.mark.parametrize("kind", list(UNUSABLE))
def test_unusable_file_is_reported_once_and_ignored(kind):
    path = cache_file()
    path.parent.mkdir(parents=True)
    path.write_text(UNUSABLE[kind]())
    tuning.reload()
    with pytest.warns(TableWarning, match="ignored"):
        assert tuning.lookup_config("dyt", PROBLEM) is None
    tuning.reload()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert tuning.lookup_config("dyt", PROBLEM) is None      # reported once only
    with tilefuse.level(2):
        assert launch.pick_config(PROBLEM) == configs.heuristic(PROBLEM)

    with pytest.warns(TableWarning, match="moved to"):
        table.record("dyt", {KEY: raw(B)})                      # the next write starts afresh
    assert tuning.lookup_config("dyt", PROBLEM) == B
    assert [p.name for p in path.parent.glob("*.invalid-*")]
    assert json.loads(path.read_text())["families"]["dyt"][KEY]["winner"] == B.to_dict()


def test_files_moved_aside_in_one_second_each_keep_their_own(monkeypatch):
    """Two unusable files moved aside within one second (the name's time stamp the same) go to
    two names, so neither file is lost for inspection."""
    path = cache_file()
    path.parent.mkdir(parents=True)
    monkeypatch.setattr(store.time, "strftime", lambda fmt, *a: "20261207-000000")
    for n, text in enumerate(("{first", "{second")):
        path.write_text(text)
        tuning.reload()
        with pytest.warns(TableWarning, match="moved to"):
            table.record("dyt", {KEY: raw(A if n else B)})
    aside = sorted(path.parent.glob("*.invalid-*"))
    assert sorted(p.read_text() for p in aside) == ["{first", "{second"], [p.name for p in aside]


def test_invalid_entries_are_dropped_one_by_one():
    good = "fwd-M128-N32-x4"
    entries = {
        good: raw(A),
        KEY: {"winner": {**A.to_dict(), "unroll": 2}, "measured": {}},       # unknown field
        "fwd-M256-N32-x4": raw(DyTConfig(1, 64, 2, 4)),                      # outside the space
        "fwd-M512-N32-x4": {"winner": "fused"},                              # neither
        "fwd-M1024-N32-x4": {"winner": BASELINE, "extra": 1},                # unknown entry field
        "sideways": raw(BASELINE),                                           # not a key
    }
    path = cache_file()
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"schema": store.SCHEMA, "fingerprint": fingerprint(),
                                "families": {"dyt": entries, "nope": {KEY: raw(BASELINE)}}}))
    tuning.reload()
    with pytest.warns(TableWarning) as caught:
        assert tuning.lookup_config("dyt", DYT.problem_for_key(good)) == A
    assert len(caught) == 6
    assert all(not tuning.is_covered("dyt", k) for k in entries if k not in (good, "sideways"))


def test_lookups_read_the_files_once(monkeypatch):
    table.record("dyt", {KEY: raw(A)})
    tuning.reload()
    reads = []
    real_load = store.load
    monkeypatch.setattr(store, "load", lambda *a: reads.append(a) or real_load(*a))
    for _ in range(100):
        assert tuning.lookup_config("dyt", PROBLEM) == A
    assert len(reads) == 1


def test_a_builtin_table_without_entries_is_fine():
    write_builtin({})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert tuning.lookup_config("dyt", PROBLEM) is None and tuning.entries() == []


def test_export_builtin_round_trip(tmp_path):
    table.record("dyt", {KEY: raw(A), "bwd-M64-N32-x4": raw(BASELINE)})
    path = table.export_builtin(store.builtin_dir())
    assert path.name == store.builtin_name(fingerprint())
    os.unlink(cache_file())
    tuning.reload()
    assert {(k, src) for _, k, src, _ in tuning.entries()} == {
        (KEY, "builtin"), ("bwd-M64-N32-x4", "builtin")}
    assert tuning.lookup_config("dyt", PROBLEM) == A


def test_export_builtin_keeps_the_shipped_entries_the_cache_does_not_hold(tmp_path):
    """A sweep skips the keys the shipped table covers, so the cache holds only what it swept:
    the export merges it over the shipped entries (the cache's win) instead of dropping them."""
    write_builtin({KEY: raw(BASELINE), "bwd-M64-N32-x4": raw(A)})
    tuning.reload()
    table.record("dyt", {KEY: raw(A)})
    path = table.export_builtin(tmp_path)
    families = json.loads(path.read_text())["families"]
    assert set(families["dyt"]) == {KEY, "bwd-M64-N32-x4"}
    assert families["dyt"][KEY]["winner"] != BASELINE and families["dyt"]["bwd-M64-N32-x4"]["winner"] != BASELINE


def test_export_builtin_refuses_an_empty_folder_argument(capsys):
    """``--export-builtin ""`` (an unset shell variable) is an error, not a full sweep."""
    from tilefuse.tuning import command
    with pytest.raises(SystemExit) as exc:
        command.main(["--export-builtin", ""])
    assert exc.value.code == 2 and "--export-builtin needs a folder" in capsys.readouterr().err


def _writer(cache_dir, rank, n, barrier):
    os.environ["TILEFUSE_CACHE_DIR"] = cache_dir
    from tilefuse.tuning import table as child_table
    barrier.wait()
    for i in range(n):
        rows = 2 ** (6 + i)
        child_table.record("dyt", {f"{'fwd' if rank == 0 else 'bwd'}-M{rows}-N32-x4": raw(BASELINE)})


def test_two_processes_writing_at_once_keep_both_entries():
    n = 12
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(2)
    cache = os.environ["TILEFUSE_CACHE_DIR"]
    procs = [ctx.Process(target=_writer, args=(cache, rank, n, barrier)) for rank in (0, 1)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    (path,) = cache_file().parent.glob("*.json")       # the children's fingerprint file
    entries = json.loads(path.read_text())["families"]["dyt"]   # parses: never torn
    assert set(entries) == {f"{p}-M{2 ** (6 + i)}-N32-x4" for p in ("fwd", "bwd") for i in range(n)}
    assert all(store.parse_entry("dyt", key, e).winner == BASELINE for key, e in entries.items())
    assert not list(path.parent.glob("*.tmp"))


def test_a_lookup_racing_a_registration_never_memoises_the_old_answer(tuning_table, monkeypatch):
    """A lookup that resolved the table before another thread's register() must not memoise
    that answer after the registration cleared the memo (every later lookup, and every plan
    keyed on the new generation, would keep the old config): the registration waits for the
    lookup in flight, then clears. Here the lookup pauses between resolving and memoising."""
    import threading
    entered, proceed = threading.Event(), threading.Event()
    real_resolve = table._DeviceTable.resolve

    def paused(self):
        resolved = real_resolve(self)
        if threading.current_thread().name == "reader":
            entered.set()
            proceed.wait(10)
        return resolved

    monkeypatch.setattr(table._DeviceTable, "resolve", paused)
    answers = []
    reader = threading.Thread(target=lambda: answers.append(table.lookup_config("dyt", PROBLEM)), name="reader")
    reader.start()
    assert entered.wait(10)
    writer = threading.Thread(target=lambda: tuning.register("dyt", {PROBLEM: A}))
    writer.start()
    writer.join(0.3)
    assert writer.is_alive(), "the registration did not wait for the lookup in flight"
    proceed.set()
    reader.join(10)
    writer.join(10)
    assert answers == [None]                                  # answered from the table before
    generation = table.generation()
    assert table.lookup_config("dyt", PROBLEM) == A           # nothing stale memoised
    assert table.generation() == generation


def test_a_number_no_float_holds_is_dropped_and_show_still_works(capsys):
    """A hand-edited measured number too large for a float (10**400 as a JSON integer) is a
    bad field, reported and dropped; the entry stays and ``tilefuse tune --show`` displays it."""
    from tilefuse.tuning.command import main
    path = cache_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    entry = {"winner": "baseline", "measured": {"speedup": 10 ** 400, "spread": [1, 1]}}
    path.write_text(json.dumps({"schema": store.SCHEMA, "fingerprint": fingerprint(),
                                "families": {"dyt": {KEY: entry}}}))
    tuning.reload()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TableWarning)
        assert tuning.get_entry("dyt", KEY) == BASELINE
        assert "speedup" not in table.get_measured("dyt", KEY)
        assert main(["--show"]) == 0
    assert KEY in capsys.readouterr().out


def test_table_files_get_an_ordinary_files_mode():
    """A written table takes the umask's mode (mkstemp's 0600 would hide a shared cache folder's
    file, or an exported built-in table, from other users)."""
    table.record("dyt", {KEY: raw(A)})
    mask = os.umask(0o022)
    os.umask(mask)
    assert cache_file().stat().st_mode & 0o777 == 0o666 & ~mask


def test_the_lookup_memo_stays_bounded():
    """dyt's problems carry the exact row count, so each row count is a memo entry of its
    own: the memo is dropped whole when it reaches table.MEMO_MAX, and answers stay right."""
    table.record("dyt", {KEY: raw(A)})
    for rows in range(1, table.MEMO_MAX + 500):
        tuning.lookup_config("dyt", DyTProblem("fwd", rows, 32, 4, False))
    assert 0 < len(table._memo) <= table.MEMO_MAX
    assert tuning.lookup_config("dyt", PROBLEM) == A


def test_a_record_reaches_every_device_sharing_the_cache_file(monkeypatch):
    """Two identical GPUs share one fingerprint and one cache file: a result recorded on one
    device is what the other's lookups see at once, without a reload. Simulated on the CPU: two devices of the CPU's fingerprint."""
    import torch
    cpu = store.fingerprint(-1)
    monkeypatch.setattr(store, "fingerprint", lambda index: cpu)
    monkeypatch.setattr(table, "_has_cuda", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    current = [1]
    monkeypatch.setattr(torch.cuda, "current_device", lambda: current[0])
    tuning.reload()
    assert tuning.get_entry("dyt", KEY) is None   # device 1's table, loaded before the record
    current[0] = 0
    table.record("dyt", {KEY: raw(A)}, 0)
    current[0] = 1
    assert table._tables[0].path == table._tables[1].path and tuning.get_entry("dyt", KEY) == A
