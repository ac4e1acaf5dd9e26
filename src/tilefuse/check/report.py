"""Write the check report: report.json (everything) and report.md (the "Testing Done" section a
kernel pull request needs); each op's benchmark section is rendered by its module."""

from __future__ import annotations

import json
import math
from pathlib import Path

from .sections import section


def cell(value) -> str:
    """``value`` as the text of one markdown table cell: a ``|`` in it (an error name such as
    so2's ``max|fused-relay|``, an exception's ``int | None``) escaped, so it does not split
    the cell, and line breaks as spaces."""
    return str(value).replace("|", "\\|").replace("\n", " ")


def _fmt_err(v: float) -> str:
    return "inf" if v == math.inf else f"{v:.1e}"


def _finite(value):
    """``value`` with every non-finite float (a failed check's NaN or inf error) as the string
    Python prints for it ("nan", "inf", "-inf"): bare NaN / Infinity are not JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def verification_row(op: str, path: str, case: str, errors: dict, tol: float, engaged=True,
                     not_engaged: str = "kernels did not launch", over_bound: str = "error over bound") -> dict:
    """A verification row from its errors against ``tol``: ok when ``engaged`` (the kernels
    under test launched, or the caller's own condition held) and every error is finite and
    within ``tol``. worst/bound is inf when any error is not finite (max() over values holding
    a NaN depends on where the NaN is, and a NaN compares False), or with ``tol`` 0 when any is
    not 0; a failed row always says why: ``not_engaged``, ``over_bound`` or both."""
    finite = all(math.isfinite(e) for e in errors.values())
    within = finite and all(e <= tol for e in errors.values())
    worst = max(errors.values(), default=0.0) if finite else math.inf
    ok = bool(engaged) and within
    why = ([] if engaged else [not_engaged]) + ([] if within else [over_bound])
    return {"op": op, "path": path, "case": case, "ok": ok, "errors": errors,
            "worst_error_over_bound": worst / tol if tol else (0.0 if worst == 0 else math.inf),
            "detail": "" if ok else "; ".join(why)}


def write_json(path: Path, report: dict) -> None:
    path.write_text(json.dumps(_finite(report), indent=2, default=str, allow_nan=False))


def _tuning_markdown(cov: dict, on_gpu: bool) -> list[str]:
    """The tuning table's coverage of each op's standard grid (check.tuning_coverage)."""
    from . import coverage_lines
    lines = ["", "## Tuning table", "", coverage_lines(cov, on_gpu)[0] + "."]
    if "error" in cov:
        return lines
    lines += ["", "| op | standard keys covered | built-in / cache / runtime entries | keys not covered |",
              "|---|---|---|---|"]
    for name, f in cov["families"].items():
        missing = ", ".join(f["missing"][:6]) + (f" and {len(f['missing']) - 6} more" if len(f["missing"]) > 6 else "")
        lines.append(f"| {name} | {f['covered']}/{f['grid']} | {f['builtin']} / {f['cache']} / {f['runtime']} | "
                     f"{missing or '-'} |")
    return lines


def write_markdown(path: Path, report: dict) -> None:
    env = report["environment"]
    lines = ["# tilefuse check", "", "## Environment", ""]
    lines += [f"- {k}: {v}" for k, v in env.items()]
    ver = report["verification"]
    n_ok = sum(r["ok"] for r in ver)
    if "ops" in report:
        quick = "; --quick (the small sizes)" if report.get("quick") else ""
        lines += ["", f"Ops: {', '.join(report['ops'])}{quick}"]
    if ver and not env.get("cuda_available"):
        lines += ["", "No CUDA device: the kernels ran in Triton's interpreter. The rows of GPU-only paths (the "
                  "Gluon kernels of the compose route and of fp8_block, the tuning table's picks) are not in "
                  "this report."]
    if "tuning" in report:
        lines += _tuning_markdown(report["tuning"], bool(env.get("cuda_available")))
    if ver:
        lines += ["", f"## Verification: {n_ok}/{len(ver)} passed", "",
                  "Errors are relative errors against the row's reference: float64 unless the path names "
                  "another (the unfused composition, the relay, eager PyTorch); the rows that compare "
                  "bitwise or against eager (dyt's alpha=inf, so2's fused against relay) give the largest "
                  "absolute difference instead. 'worst/bound' (<= 1 passes): "
                  "for dyt the largest elementwise error as a fraction of its derived bound; for "
                  "grouped_glu_mlp and so2_mixing_stack the largest normwise error as a fraction of the "
                  "row's tolerance.", "",
                  "| op | path | case | result | errors | worst/bound | detail |", "|---|---|---|---|---|---|---|"]
    else:
        lines += ["", "## Verification: not run (`tilefuse bench`)"]
    for r in ver:
        errs = ", ".join(f"{k} {_fmt_err(v)}" for k, v in r["errors"].items())
        lines.append(f"| {cell(r['op'])} | {cell(r['path'])} | {cell(r['case'])} | "
                     f"{'pass' if r['ok'] else '**FAIL**'} | {cell(errs)} | {r['worst_error_over_bound']:.2f} | "
                     f"{cell(r['detail'])} |")
    for op, b in report.get("benchmarks", {}).items():
        lines += ["", f"## Benchmark: {op}", ""]
        if "skipped" in b:
            lines.append(f"No timing was taken: {b['skipped']}.")
        else:
            lines += section(op).benchmark_markdown(b)
    for name in report.get("plots", []):
        lines += ["", f"![{name}]({name})"]
    path.write_text("\n".join(lines) + "\n")

