"""The command line's surface (version, help, refusals, progress bars, `info`), the report's
JSON, and the packaging metadata (build requirement, version source, sdist contents)."""

from __future__ import annotations

import argparse
import ast
import contextlib
import json
import math
import re
import subprocess
import sys
import tarfile
import tomllib
from pathlib import Path

import pytest
import torch

import tilefuse
from tilefuse import cli
from tilefuse.tuning import command, table

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
HAS_CUDA = torch.cuda.is_available()
no_cuda_only = pytest.mark.skipif(HAS_CUDA, reason="checks the behaviour without a CUDA device")


# --- 8. the command line --------------------------------------------------------------------

def test_version_flag_prints_the_package_version(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == f"tilefuse {tilefuse.__version__}"


def _all_parsers():
    parser = cli._parser()
    yield "tilefuse", parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            yield from action.choices.items()
    yield "tilefuse tune", command._parser()


def test_every_option_has_help_and_the_description_is_plain_text():
    for name, parser in _all_parsers():
        for action in parser._actions:
            if action.option_strings:
                assert action.help, f"{name} {action.option_strings[0]} has no help text"
    description = cli._parser().description
    assert description and "``" not in description and "`" not in description


@no_cuda_only
def test_tune_sweep_without_a_gpu_refuses_in_one_line_and_records_nothing(capsys):
    assert command.main(["--op", "dyt", "--shape", "64x32", "--pass", "fwd", "--no-progress"]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and "no CUDA device" in err[0], captured.err
    assert "timer=" not in captured.err + captured.out          # no test-only advice
    assert not table.is_covered("dyt", "fwd-M64-N32-x4")


@no_cuda_only
def test_tune_devices_without_cuda_is_one_line_not_a_traceback(capsys):
    assert command.main(["--op", "dyt", "--shape", "64x32", "--devices", "0", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("tilefuse tune: ") and "CUDA" in err[0], err


def test_tune_devices_beyond_the_machine_is_one_line(monkeypatch):
    monkeypatch.setattr(command.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(command.torch.cuda, "device_count", lambda: 2)
    assert command._gpu_missing(["cuda:0", "cuda:1"]) is None
    why = command._gpu_missing(["cuda:0", "cuda:3"])
    assert "cuda:3" in why and "2 CUDA device(s)" in why and "\n" not in why


def test_tune_show_works_without_a_gpu_and_prints_its_fingerprint_as_json(capsys):
    assert cli.main(["tune", "--show"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("fingerprint: ")
    assert json.loads(first[len("fingerprint: "):]) == table.table_location()[0]


@pytest.mark.parametrize("raw", ["7", "two"])
def test_a_bad_tilefuse_level_is_one_line(monkeypatch, capsys, raw):
    monkeypatch.setenv("TILEFUSE_LEVEL", raw)
    assert cli.main(["info"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "TILEFUSE_LEVEL" in err[0] and repr(raw) in err[0], err


def test_progress_bars_are_off_when_stderr_is_not_a_terminal(monkeypatch, tmp_path):
    import tilefuse.check as check
    seen = {}

    def fake_run_check(out, **kw):
        seen["check"] = kw["show_progress"]
        return {"verification": []}
    monkeypatch.setattr(check, "run_check", fake_run_check)
    monkeypatch.setattr(check, "summary", lambda result, out: "")
    assert not sys.stderr.isatty()                  # pytest captures it
    assert cli.main(["check", "--no-bench", "--ops", "dyt", "--out", str(tmp_path)]) == 0
    assert seen["check"] is False

    monkeypatch.setattr(command, "_gpu_missing", lambda devices: None)
    monkeypatch.setattr(command, "sweep_parallel",
                        lambda items, devices, **kw: seen.update(tune=kw["progress"]) or ([], []))
    assert command.main(["--op", "dyt", "--shape", "64x32", "--pass", "fwd", "--force"]) == 0
    assert seen["tune"] is False


@no_cuda_only
@pytest.mark.parametrize("interpret", [False, True])
def test_info_agrees_with_itself_about_the_interpreter(monkeypatch, interpret):
    from tilefuse.check import env
    monkeypatch.setattr(env, "_collect_env", lambda: {})
    if interpret:
        monkeypatch.setenv("TRITON_INTERPRET", "1")
    else:
        monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    e = env.environment()
    assert e["triton_interpreter"] is interpret
    assert e["device"].endswith(", Triton interpreter") is interpret, e["device"]


# --- 10. report.json and the environment section ----------------------------------------------

def test_report_json_is_valid_json_when_a_check_fails(tmp_path):
    from tilefuse.check import report as rep
    failed = {"op": "dyt", "path": "fwd", "case": "x", "ok": False, "detail": "nan in output",
              "errors": {"y": math.nan, "dx": math.inf}, "worst_error_over_bound": math.nan}
    path = tmp_path / "report.json"
    rep.write_json(path, {"environment": {}, "verification": [failed], "benchmarks": {"dyt": {"ms": [-math.inf]}}})

    def no_constants(name):
        raise ValueError(f"bare {name} in report.json")
    doc = json.loads(path.read_text(), parse_constant=no_constants)
    row = doc["verification"][0]
    assert row["errors"] == {"y": "nan", "dx": "inf"} and row["worst_error_over_bound"] == "nan"
    assert doc["benchmarks"]["dyt"]["ms"] == ["-inf"] and float(row["errors"]["dx"]) == math.inf


def test_environment_reports_the_driver_from_its_one_source_with_or_without_cuda(monkeypatch):
    from tilefuse.check import env
    monkeypatch.setattr(env, "_collect_env", lambda: {})
    monkeypatch.setattr(env, "driver_version", lambda: "580.159.04")
    e = env.environment()
    assert e["driver"] == "580.159.04"
    assert [k for k in e if "driver" in k] == ["driver"]


# --- 9. packaging ------------------------------------------------------------------------------

def _lower_bound(requirements, name) -> tuple[int, ...]:
    for req in requirements:
        m = re.fullmatch(rf"{name}\s*>=\s*([0-9.]+)", req.strip())
        if m:
            return tuple(int(x) for x in m.group(1).split("."))
    raise AssertionError(f"no {name}>=... in {requirements}")


def _version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.match(r"(\d+)\.(\d+)", version).groups())


def test_build_requires_a_setuptools_that_knows_the_pep639_license_string():
    assert PYPROJECT["project"]["license"] == "MIT"
    assert _lower_bound(PYPROJECT["build-system"]["requires"], "setuptools") >= (77,)
    license_classifiers = [c for c in PYPROJECT["project"].get("classifiers", []) if c.startswith("License ::")]
    assert not license_classifiers                      # PEP 639: the expression replaces them


def test_one_version_source_that_the_build_reads_without_importing_torch():
    project = PYPROJECT["project"]
    assert "version" not in project and "version" in project["dynamic"]
    assert PYPROJECT["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "tilefuse._version.__version__"}
    source = ROOT / "src" / "tilefuse" / "_version.py"
    module = ast.parse(source.read_text())
    assert not [n for n in module.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    from tilefuse import _version
    assert tilefuse.__version__ == _version.__version__
    assert '__version__ = "' not in (ROOT / "src" / "tilefuse" / "__init__.py").read_text()


def test_package_is_typed_and_has_classifiers():
    assert (ROOT / "src" / "tilefuse" / "py.typed").is_file()
    assert "py.typed" in PYPROJECT["tool"]["setuptools"]["package-data"]["tilefuse"]
    classifiers = PYPROJECT["project"]["classifiers"]
    assert "Typing :: Typed" in classifiers and any(c.startswith("Programming Language :: Python :: 3") for c in classifiers)


def test_dependency_lower_bounds_are_the_tested_versions():
    project = PYPROJECT["project"]
    torch_min = _lower_bound(project["dependencies"], "torch")
    triton_min = _lower_bound(project["optional-dependencies"]["triton"], "triton")
    assert torch_min >= (2, 11) and triton_min >= (3, 6)          # torch 2.11 + Triton 3.6: the oldest tested
    assert _version_tuple(torch.__version__) >= torch_min
    triton = pytest.importorskip("triton")
    assert _version_tuple(triton.__version__) >= triton_min


def test_sdist_contains_what_its_tests_import(tmp_path):
    code = ("import sys; from setuptools import build_meta as b; "
            "print(b.build_sdist(sys.argv[1]))")
    run = subprocess.run([sys.executable, "-c", code, str(tmp_path)], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    with tarfile.open(tmp_path / run.stdout.strip().splitlines()[-1]) as tar:
        names = {name.split("/", 1)[1] for name in tar.getnames() if "/" in name}
    needed = [p.relative_to(ROOT).as_posix() for p in (ROOT / "tests").glob("*.py")]
    needed += ["src/tilefuse/py.typed", "src/tilefuse/_version.py", "LICENSE", "README.md",
               "benchmarks/README.md"]
    missing = [p for p in needed if p not in names]
    assert not missing, missing
    assert not [n for n in names if "__pycache__" in n]


def _bench_on_a_faked_gpu(command, monkeypatch):
    """`tilefuse bench` refuses to run without CUDA before it looks at --out: the --out tests
    fake a CUDA device for it."""
    if command == "bench":
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)


@pytest.mark.parametrize("command", ["check", "bench"])
def test_out_that_is_a_file_is_one_line_not_a_traceback(command, tmp_path, capsys, monkeypatch):
    _bench_on_a_faked_gpu(command, monkeypatch)
    path = tmp_path / "a-file"
    path.write_text("")
    with pytest.raises(SystemExit) as exc:
        cli.main([command, "--out", str(path)])
    assert exc.value.code == 2 and "exists and is not a folder" in capsys.readouterr().err
    assert path.read_text() == ""


@pytest.mark.parametrize("command", ["check", "bench"])
def test_out_that_cannot_be_made_is_one_line_not_a_traceback(command, tmp_path, capsys, monkeypatch):
    """A report folder under a file (or anywhere mkdir fails) is a usage error, exit 2 (exit
    1 is a failed check's), before any work."""
    _bench_on_a_faked_gpu(command, monkeypatch)
    path = tmp_path / "a-file"
    path.write_text("")
    with pytest.raises(SystemExit) as exc:
        cli.main([command, "--out", str(path / "report")])
    assert exc.value.code == 2 and "cannot write the report there" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["check", "bench"])
@pytest.mark.parametrize("case", ["unwritable", "report-is-a-folder", "empty"])
def test_an_out_the_report_cannot_go_into_is_refused_before_any_work(command, case, tmp_path, capsys, monkeypatch):
    """A folder that exists but takes no files, a report.json that is a folder, an empty path
    (which would write into the current folder): exit 2 with one line before anything runs,
    not a traceback with exit 1 after the whole check."""
    from tilefuse import check
    monkeypatch.setattr(check, "run_check", lambda *a, **k: pytest.fail("the check ran"))
    _bench_on_a_faked_gpu(command, monkeypatch)
    if case == "unwritable":
        out, want = "/proc/self", "cannot write the report there"        # refuses new files, even to root
    elif case == "report-is-a-folder":
        (tmp_path / "report.json").mkdir()
        out, want = str(tmp_path), "report.json there is not a file"
    else:
        out, want = "", "--out must name a folder"
    with pytest.raises(SystemExit) as exc:
        cli.main([command, "--out", out])
    assert exc.value.code == 2 and want in capsys.readouterr().err


@pytest.mark.parametrize("command", ["check", "bench"])
def test_bad_ops_create_no_report_folder(command, tmp_path, capsys):
    out = tmp_path / "new"
    assert cli.main([command, "--ops", "layernorm", "--out", str(out)]) == 2
    assert not out.exists() and "comma-separated subset" in capsys.readouterr().err


def test_export_builtin_into_a_file_is_one_line_not_a_traceback(tmp_path, capsys):
    from tilefuse.tuning import command
    path = tmp_path / "a-file"
    path.write_text("")
    for dest in (path, path / "sub"):
        with pytest.raises(SystemExit) as exc:
            command.main(["--export-builtin", str(dest)])
        err = capsys.readouterr().err
        assert exc.value.code == 2 and "--export-builtin" in err and "Traceback" not in err, err
    assert path.read_text() == ""


@pytest.mark.parametrize("command", ["check", "bench"])
def test_check_and_bench_at_level_0_say_the_kernels_are_off(command, tmp_path, capsys, monkeypatch):
    """TILEFUSE_LEVEL=0 turns the kernels off: the check says so (exit 2) instead of failing
    every row as "kernels did not launch" with exit 1 (a failed check's status); the bench
    (on a faked GPU) so too, instead of timing plain PyTorch in the rows labelled tilefuse."""
    from tilefuse import check
    monkeypatch.setenv("TILEFUSE_LEVEL", "0")
    monkeypatch.setattr(check, "run_check", lambda *a, **k: pytest.fail("the check ran"))
    _bench_on_a_faked_gpu(command, monkeypatch)
    out = tmp_path / "new"
    assert cli.main([command, "--ops", "dyt", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"tilefuse {command}: " in err and "TILEFUSE_LEVEL=0" in err and not out.exists()


@pytest.mark.parametrize("command", ["check", "bench"])
def test_refusals_create_no_report_folder(command, tmp_path, capsys, monkeypatch):
    """`tilefuse bench` without a CUDA device and `tilefuse check` without Triton refuse with
    exit 2 before --out is made: a refusal leaves nothing behind."""
    from tilefuse import check
    monkeypatch.setattr(check, "run_check", lambda *a, **k: pytest.fail("the check ran"))
    if command == "bench":
        monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
        # without CUDA the command re-runs its process under Triton's interpreter (os.execv)
        # where TRITON_INTERPRET is unset, as on a GPU machine: that would replace the test's
        # process (a GPU xdist worker went down here, 2026-12-06-h200-ay run 9)
        monkeypatch.setattr(cli, "_use_interpreter_without_cuda", lambda argv: None)
        want = "no CUDA device"
    else:
        monkeypatch.setattr(check, "triton_missing", lambda command: "Triton is not installed (faked)")
        want = "Triton is not installed"
    out = tmp_path / "new" / "report"
    assert cli.main([command, "--ops", "dyt", "--out", str(out)]) == 2
    assert want in capsys.readouterr().err and not (tmp_path / "new").exists()


def test_bench_without_triton_refuses_too(tmp_path, capsys, monkeypatch):
    """`tilefuse bench` on a CUDA machine without Triton says so (exit 2, nothing made), as
    `tilefuse check` does: before, it imported the dyt section and died with a traceback."""
    from tilefuse import check
    monkeypatch.setattr(check, "run_check", lambda *a, **k: pytest.fail("the bench ran"))
    _bench_on_a_faked_gpu("bench", monkeypatch)
    monkeypatch.setattr(check, "triton_missing", lambda command: "Triton is not installed (faked)")
    out = tmp_path / "new"
    assert cli.main(["bench", "--ops", "dyt", "--out", str(out)]) == 2
    assert "tilefuse bench: Triton is not installed" in capsys.readouterr().err and not out.exists()


def test_the_missing_triton_message_names_the_command_to_run_again(monkeypatch):
    """`tilefuse bench` without Triton tells the user to run `tilefuse bench` again, not
    `tilefuse check` (the message named check for both)."""
    import builtins
    from tilefuse import check
    real_import = builtins.__import__

    def no_triton(name, *args, **kwargs):
        if name == "triton" or name.startswith("triton."):
            raise ImportError("No module named 'triton' (faked)")
        return real_import(name, *args, **kwargs)
    monkeypatch.setattr(builtins, "__import__", no_triton)
    assert "then run `tilefuse bench` again" in check.triton_missing("bench")
    assert "then run `tilefuse check` again" in check.triton_missing()


@pytest.mark.parametrize("command, args, says", [
    ("check", ["--part-timeout", "-1"], "--part-timeout takes 0"),
    ("check", ["--part-timeout", "5", "--in-process"], "--in-process runs none"),
    ("check", ["--ops", "nosuchop"], "nosuchop"),
    ("bench", ["--ops", "nosuchop"], "nosuchop")])
def test_usage_errors_after_parsing_print_the_subcommands_usage(command, args, says, tmp_path, capsys):
    """A usage error found after parsing (the ops, the part timeout) prints the subcommand's
    usage line, as argparse's own errors do (it printed the top-level one, or none)."""
    with pytest.raises(SystemExit) if "--part-timeout" in args else contextlib.nullcontext() as raised:
        status = cli.main([command, *args, "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert (raised.value.code if raised else status) == 2
    assert err.startswith(f"usage: tilefuse {command} ") and f"tilefuse {command}: error:" in err and says in err
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("value", ["1", "on", "TRUE", "yes"])
def test_a_true_triton_interpret_of_any_spelling_needs_no_re_run(value, monkeypatch):
    """Without CUDA the CLI re-runs itself under Triton's interpreter only where Triton would
    not interpret already: any value Triton reads as true is taken as it is."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setenv("TRITON_INTERPRET", value)
    monkeypatch.setattr(cli.os, "execv", lambda *a: pytest.fail("re-ran the process"))
    cli._use_interpreter_without_cuda(["check"])
    assert cli.os.environ["TRITON_INTERPRET"] == value

