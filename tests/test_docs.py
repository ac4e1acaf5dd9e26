"""The documentation: every repository path it (and the code's comments) cites exists, the
README's examples run as written, and `tilefuse check` without Triton says so."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from importlib.util import find_spec
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Files whose text cites repository paths relative to the root.
CITING = sorted({ROOT / "README.md", ROOT / "CONTRIBUTING.md", *ROOT.glob("docs/**/*.md"),
                 *ROOT.glob("src/**/*.py"), *ROOT.glob("benchmarks/*.py"), *ROOT.glob("benchmarks/*.md"),
                 *ROOT.glob("benchmarks/*.sh")})
# A path starting at one of the top-level folders, not part of a longer path or a variable
# ($OUT/..., /tmp/site/src, .snap/old/src are not repository paths).
PATH = re.compile(r"(?<![\w./$-])((?:docs|benchmarks|tests|src)/[\w.<>*{}/-]*)")
# Placeholders (`ops/<op>/`, `results/<date>-h200-<letter>/`) and globs (`tests/test_*.py`).
PLACEHOLDER = re.compile(r"[<>*{}]")
# A run folder's README may cite a file in the tree it measured, named by its commit.
COMMIT = re.compile(r"\b[0-9a-f]{7,40}\b")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def cited_paths() -> list[tuple[str, int, str]]:
    """(citing file, line, cited path) for every repository path cited in CITING."""
    cited = []
    for f in CITING:
        for n, line in enumerate(f.read_text().splitlines(), 1):
            for m in PATH.finditer(line):
                p = m.group(1).rstrip(".,;:)'\"`")
                if PLACEHOLDER.search(p):
                    continue
                if p.startswith("benchmarks/results/") and COMMIT.search(line):
                    continue
                cited.append((_rel(f), n, p))
    return cited


def test_cited_repository_paths_exist():
    cited = cited_paths()
    assert len(cited) > 50   # the scan found the citations (README, docs, docstrings)
    missing = [f"{f}:{n}: {p}" for f, n, p in cited if not (ROOT / p).exists()]
    assert not missing, "cited paths that do not exist:\n" + "\n".join(missing)


def test_markdown_links_resolve():
    missing = []
    for f in [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *ROOT.glob("docs/**/*.md")]:
        for n, line in enumerate(f.read_text().splitlines(), 1):
            for m in LINK.finditer(line):
                target = m.group(1).split("#")[0]
                if not target or re.match(r"[a-z]+:", target):
                    continue
                if not (f.parent / target).exists():
                    missing.append(f"{_rel(f)}:{n}: {m.group(1)}")
    assert not missing, "links to files that do not exist:\n" + "\n".join(missing)


def test_no_citations_of_files_outside_the_repository():
    """The specs and the design live in docs/: `specs/x.md` or `DESIGN.md` cited from the code
    (paths there are relative to the root) names a file the repository does not have."""
    stale = []
    for f in CITING + sorted(ROOT.glob("tests/*.py")):
        if f == Path(__file__).resolve():
            continue
        for n, line in enumerate(f.read_text().splitlines(), 1):
            in_docs = f.is_relative_to(ROOT / "docs")
            if "DESIGN.md" in line or (not in_docs and re.search(r"(?<![\w/])specs/", line)):
                stale.append(f"{_rel(f)}:{n}: {line.strip()}")
    assert not stale, "\n".join(stale)


def test_docs_index_lists_every_page():
    index = (ROOT / "docs" / "README.md").read_text()
    pages = [p for p in ROOT.glob("docs/**/*") if p.is_file() and p.name != "README.md"]
    assert len(pages) >= 6
    unlisted = [_rel(p) for p in pages if f"({p.relative_to(ROOT / 'docs')})" not in index]
    assert not unlisted, f"docs/README.md does not link {unlisted}"
    assert "(../CONTRIBUTING.md)" in index


def test_numpy_spec_of_so2_matches_finite_differences():
    pytest.importorskip("numpy")
    out = subprocess.run([sys.executable, str(ROOT / "docs/specs/so2_mixing_stack_numpy_spec.py")],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    errors = [float(v) for v in re.findall(r"(?:FD\||err) ([0-9.e+-]+)", out)]
    assert len(errors) == 5 and max(errors) < 1e-6, out


def readme_python_blocks() -> list[str]:
    text = (ROOT / "README.md").read_text()
    return re.findall(r"^```python\n(.*?)^```$", text, flags=re.S | re.M)


def test_readme_has_examples_for_every_op():
    blocks = "\n".join(readme_python_blocks())
    for name in ("tilefuse.dyt(", "DyT(", "convert_layernorm_to_dyt(", "SO2MixingStack(",
                 "tilefuse.grouped_glu_mlp(", "GroupedGLUMLP(", "convert_hf_moe_experts("):
        assert name in blocks, name


def _user_env(**extra) -> dict:
    """A user's environment: no interpreter switch (conftest sets it for the test process) and
    a private tuning cache."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(extra)
    return env


@pytest.mark.parametrize("index", range(len(readme_python_blocks())))
def test_readme_example_runs_as_written(index, tmp_path):
    """Each ``python`` block of the README runs on its own, in a fresh interpreter (so it
    defines everything it uses), on this machine's device."""
    code = readme_python_blocks()[index]
    if "import transformers" in code and find_spec("transformers") is None:
        pytest.skip("the example needs transformers")
    script = tmp_path / f"readme_example_{index}.py"
    script.write_text(code)
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300, env=_user_env())
    assert proc.returncode == 0, f"README example {index} failed:\n{code}\n{proc.stdout}\n{proc.stderr}"


BLOCK_TRITON = '''
import sys


class _NoTriton:
    """Makes `import triton` fail as it does where Triton is not installed."""

    def find_spec(self, name, path=None, target=None):
        if name == "triton" or name.startswith("triton."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, _NoTriton())
'''


def _without_triton(tmp_path, args, **kw):
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(BLOCK_TRITON)
    path = os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, *args], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env=_user_env(PYTHONPATH=path, TILEFUSE_CACHE_DIR=str(tmp_path / "cache")), **kw)


def test_check_without_triton_says_so(tmp_path):
    proc = _without_triton(tmp_path, ["-c", "import triton"])
    assert proc.returncode != 0 and "No module named 'triton'" in proc.stderr   # the simulation works
    proc = _without_triton(tmp_path, ["-m", "tilefuse.cli", "check", "--quick", "--no-progress",
                                      "--out", str(tmp_path / "rep")])
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert "Triton is not installed" in out, out
    assert "Traceback" not in out and "did not launch" not in out, out
    assert "pip install" in out, out   # says how to get it
    assert not (tmp_path / "rep" / "report.json").exists()


def test_ops_run_their_reference_without_triton(tmp_path):
    """Without Triton the library imports and the ops run the PyTorch reference (README)."""
    code = ("import torch, tilefuse\n"
            "x = torch.randn(4, 8)\n"
            "y = tilefuse.dyt(x, torch.tensor([0.5]), torch.ones(8))\n"
            "torch.testing.assert_close(y, torch.tanh(0.5 * x))\n"
            "print('ok')\n")
    proc = _without_triton(tmp_path, ["-c", code])
    assert proc.returncode == 0 and "ok" in proc.stdout, proc.stdout + proc.stderr
