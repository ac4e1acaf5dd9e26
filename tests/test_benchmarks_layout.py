"""benchmarks/ holds standing programs only, each saying its question, command, output and
time; every dated run's folder is indexed and names commands that exist (in this tree, or in
a commit its README names)."""

import ast
import re
import subprocess
from functools import lru_cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"
RESULTS = BENCH / "results"
RUNS = sorted(p for p in RESULTS.iterdir() if p.is_dir())
PATH = re.compile(r"benchmarks/[A-Za-z0-9_./-]*[A-Za-z0-9_]")
COMMIT = re.compile(r"\b[0-9a-f]{7,40}\b")
CLI = re.compile(r"(?:python3? -m tilefuse\.cli|`tilefuse) (\w[\w-]*)")
SUBCOMMANDS = {"check", "tune", "bench", "info"}


def standing_programs():
    return sorted(p for p in BENCH.iterdir() if p.is_file() and p.suffix in (".py", ".sh"))


@lru_cache(maxsize=None)
def _git(*args) -> subprocess.CompletedProcess | None:
    try:
        return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None


def _have_git() -> bool:
    r = _git("rev-parse", "--git-dir")
    return r is not None and r.returncode == 0


def _commits(text: str) -> list[str]:
    out = []
    for token in dict.fromkeys(COMMIT.findall(text)):
        r = _git("rev-parse", "--verify", "-q", f"{token}^{{commit}}")
        if r is not None and r.returncode == 0:
            out.append(r.stdout.strip())
    return out


def _in_commit(commit: str, path: str) -> bool:
    r = _git("cat-file", "-e", f"{commit}:{path}")
    return r is not None and r.returncode == 0


def test_no_dated_run_script_directly_in_benchmarks():
    names = [p.name for p in BENCH.iterdir() if p.is_file()]
    assert not [n for n in names if re.fullmatch(r"run.*\.sh|.*_by_tree\.sh", n)], names
    assert not (BENCH / "h200_runbook.md").exists(), "benchmarks/README.md replaces the runbook"
    assert set(names) <= {"README.md"} | {p.name for p in standing_programs()}


@pytest.mark.parametrize("program", standing_programs(), ids=lambda p: p.name)
def test_standing_program_says_question_command_output_and_time(program):
    if program.suffix == ".py":
        doc = ast.get_docstring(ast.parse(program.read_text()))
    else:
        lines = program.read_text().splitlines()[1:]
        doc = "\n".join(line[2:] for line in lines if line.startswith("#"))
    assert doc, f"{program.name}: no docstring"
    assert doc.splitlines()[0].rstrip().endswith("?"), f"{program.name}: the first line is not its question"
    assert f"benchmarks/{program.name}" in doc, f"{program.name}: the docstring names no command running it"
    assert re.search(r"\bprint", doc, re.IGNORECASE), f"{program.name}: the docstring does not say what it prints"
    assert "H200" in doc or "no GPU" in doc, f"{program.name}: the docstring gives no time on the H200"


def test_benchmarks_readme_lists_every_standing_program_and_names_existing_paths():
    text = (BENCH / "README.md").read_text()
    for program in standing_programs():
        assert f"benchmarks/{program.name}" in text, f"benchmarks/README.md does not list {program.name}"
    missing = [p for p in dict.fromkeys(PATH.findall(text)) if not (ROOT / p).exists()]
    assert not missing, f"benchmarks/README.md names paths that do not exist: {missing}"
    assert not [c for c in CLI.findall(text) if c not in SUBCOMMANDS]


def test_results_index_has_one_line_per_run():
    index = (RESULTS / "README.md").read_text()
    for run in RUNS:
        lines = [line for line in index.splitlines() if f"{run.name}/" in line and line.startswith("|")]
        assert len(lines) == 1, f"results/README.md: {len(lines)} index lines for {run.name}"
        assert (run / "README.md").exists(), f"{run.name} has no README.md"
    assert "benchmarks/results/README.md" in (ROOT / "README.md").read_text()


@pytest.mark.parametrize("run", RUNS, ids=lambda p: p.name)
def test_results_readme_names_commands_that_exist(run):
    """A path a results README names exists in this tree, or at a commit that README names
    (its runs' trees: the programs its commands call ran there). Shell scripts must exist in
    this tree: a dated run's script lives in its run's folder."""
    text = (run / "README.md").read_text()
    commits = _commits(text) if _have_git() else []
    unresolved = []
    for path in dict.fromkeys(PATH.findall(text)):
        if (ROOT / path).exists():
            continue
        if path.endswith(".sh"):
            unresolved.append(path)
            continue
        if not _have_git():
            pytest.skip("no git history here to look up the run's trees")
        if not any(_in_commit(c, path) for c in commits):
            unresolved.append(path)
    if unresolved and len(commits) < len(set(COMMIT.findall(text))):
        # A stale or shallow history (the device's copy) may lack the commit that holds them.
        pytest.skip(f"{run.name}: {unresolved} not found, and some commits it names are not in this history")
    assert not unresolved, f"{run.name}/README.md names paths in neither this tree nor its commits: {unresolved}"
    assert not [c for c in CLI.findall(text) if c not in SUBCOMMANDS]


@pytest.mark.parametrize("script", sorted(RESULTS.rglob("*.sh")), ids=lambda p: str(p.relative_to(RESULTS)))
def test_run_scripts_find_their_siblings(script):
    """Moved run scripts reach the scripts and probes they call through their own folder."""
    for rel in re.findall(r'"\$\(dirname "\$0"\)"/([\w./-]+)', script.read_text()):
        assert (script.parent / rel).exists(), f"{script.name} calls {rel}, which is not beside it"
