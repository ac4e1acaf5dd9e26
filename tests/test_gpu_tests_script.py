"""benchmarks/gpu_tests.sh's switches, run on any machine with a stand-in compute-sanitizer:
TESTS picks the test files, MEMCHECK=1 runs pytest under the sanitizer with PyTorch's caching
allocator off and turns a reported error into exit 99, MEMCHECK unset or 0 runs without it, and
MEMCHECK=1 without the sanitizer on the PATH stops with a message (exit 127)."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_tests.sh"

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")

# Records its arguments and the allocator variable its program sees, then runs the program (the
# arguments after its own options) and, with FAKE_ERRORS set, exits 99 as the real one does
# with --error-exitcode 99 when it reports an error.
FAKE = """#!/bin/bash
echo "$@" > "$RECORD/args"
echo "${PYTORCH_NO_CUDA_MEMORY_CACHING:-unset}" > "$RECORD/caching"
while [ $# -gt 0 ] && [ "${1#--}" != "$1" ]; do
  case "$1" in --tool|--error-exitcode|--print-limit|--target-processes) shift 2 ;; *) shift ;; esac
done
"$@"
status=$?
[ -n "${FAKE_ERRORS:-}" ] && exit 99
exit $status
"""


@pytest.fixture
def env(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    python = bin_dir / "python3"   # this interpreter, with its packages (pytest-xdist)
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    python.chmod(0o755)
    tests = tmp_path / "probe"
    tests.mkdir()
    (tests / "test_probe.py").write_text("def test_probe():\n    assert 1 + 1 == 2\n")
    out = tmp_path / "out"
    out.mkdir()
    e = {k: v for k, v in os.environ.items() if k not in ("MEMCHECK", "TESTS", "PYTORCH_NO_CUDA_MEMORY_CACHING")}
    e.update(PATH=f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin", OUT=str(out), RECORD=str(tmp_path),
             TESTS=str(tests / "test_probe.py"))
    return tmp_path, e


def run(e, **extra):
    return subprocess.run(["bash", str(SCRIPT), "120", "1"], env={**e, **extra}, capture_output=True, text=True,
                          timeout=300)


def with_sanitizer(tmp_path):
    fake = tmp_path / "bin" / "compute-sanitizer"
    fake.write_text(FAKE)
    fake.chmod(0o755)


def test_tests_picks_the_files_and_memcheck_off_runs_no_sanitizer(env):
    tmp_path, e = env
    with_sanitizer(tmp_path)
    for extra in ({}, {"MEMCHECK": "0"}):
        done = run(e, **extra)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "1 passed" in done.stdout
        assert not (tmp_path / "args").exists()   # the sanitizer never ran


def test_memcheck_runs_pytest_under_the_sanitizer_without_the_caching_allocator(env):
    tmp_path, e = env
    with_sanitizer(tmp_path)
    done = run(e, MEMCHECK="1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout
    args = (tmp_path / "args").read_text().split()
    assert args[:2] == ["--tool", "memcheck"] and "--target-processes" in args and "all" in args
    assert args[args.index("--error-exitcode") + 1] == "99"
    assert args[args.index("python3"):][:3] == ["python3", "-m", "pytest"]
    assert (tmp_path / "caching").read_text().strip() == "1"


def test_a_sanitizer_error_fails_the_run_with_its_exit_code(env):
    tmp_path, e = env
    with_sanitizer(tmp_path)
    done = run(e, MEMCHECK="1", FAKE_ERRORS="1")
    assert done.returncode == 99
    assert "exit 99" in done.stdout


def test_memcheck_without_the_sanitizer_stops_with_a_message(env):
    _, e = env
    done = run(e, MEMCHECK="1")
    assert done.returncode == 127
    assert "compute-sanitizer is not on the PATH" in done.stdout
