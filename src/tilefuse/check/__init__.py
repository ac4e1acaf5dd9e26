"""`tilefuse check`: does this build work on this machine, and how fast is it.

Verifies every op and path against float64 references (in Triton's interpreter at small sizes
when there is no GPU), benchmarks against the installed peers on a GPU, and writes
``report.md``, ``report.json`` and PNG plots.
"""

from __future__ import annotations

import time
from pathlib import Path

import torch

from .env import environment, ptxas
from .sections import OPS, section


def _progress(enabled: bool):
    def wrap(items, desc=""):
        try:
            from tqdm import tqdm
        except ImportError:
            return items
        return tqdm(items, desc=desc, disable=not enabled, leave=False)
    return wrap


def triton_missing(command: str = "check") -> str | None:
    """Why the kernels cannot run here, when Triton cannot be imported; None when it can.
    ``command``: the `tilefuse` command the message tells the user to run again.

    Every op's verification launches Triton kernels (in the interpreter without a GPU), so
    without Triton `tilefuse check` would only report that no kernel launched."""
    try:
        import triton  # noqa: F401
    except ImportError as exc:
        return ("Triton is not installed, so no tilefuse kernel can run here "
                f"({exc}). Install it with `pip install 'tilefuse[triton]'` "
                f"(or `pip install triton`), then run `tilefuse {command}` again.")
    return None


def parse_ops(text: str | None) -> tuple[str, ...]:
    """``--ops`` value (comma-separated op names) -> the ops in report order; None: all."""
    if text is None:
        return OPS
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in OPS]
    if unknown or not names:
        raise ValueError(f"--ops takes a comma-separated subset of {', '.join(OPS)}; got {text!r}")
    return tuple(op for op in OPS if op in names)


def run_check(out_dir: str | Path = "tilefuse-report", *, quick: bool = False, bench: bool = True,
              verify: bool = True, show_progress: bool = True, ops: tuple[str, ...] = OPS,
              isolate: bool = False, part_timeout: float | None = None) -> dict:
    """Run verification (and benchmarks on a GPU) of ``ops``, write the report, return it.

    A section that raises is a failed row (verification) or a failed entry (benchmark) with
    the error, and the other sections still run; a report left in ``out_dir`` by an earlier
    run is removed first, so a run that dies midway leaves none rather than an old one.
    ``isolate`` runs each op's verification and benchmark (the parts) in a child process
    (tilefuse.isolate; the CLI's default): a part whose process dies (a segfault in Triton's
    interpreter) or after which a CUDA launch fails (a context lost to an illegal memory
    access) is a failed row saying how and where, and the parts after it run in a fresh
    process; so does a part still running after ``part_timeout`` seconds (isolated only)."""
    from . import report as rep
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for name in ("report.json", "report.md"):
        (out / name).unlink(missing_ok=True)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    t0 = time.time()
    result = {"environment": environment(), "ops": list(ops), "quick": quick, "tuning": tuning_coverage(ops),
              "verification": [], "benchmarks": {}, "plots": []}
    parts = [("verification", op, verify_op, {"quick": quick, "device": device, "show_progress": show_progress})
             for op in (ops if verify else ())]
    if device == "cuda" and bench:
        parts += [("benchmark", op, benchmark_op, {"quick": quick, "show_progress": show_progress,
                                                   "out_dir": str(out)}) for op in ops]
    outcomes = _run_parts(isolate, parts, part_timeout)
    for (part, op, _, _), outcome in zip(parts, outcomes):
        died = [_died_row(op, part, outcome)] if outcome.failed else []
        if part == "verification":
            result["verification"] += (outcome.value if outcome.ok else []) + died
            continue
        done = outcome.value if outcome.ok else {
            "benchmark": {"skipped": f"the benchmark did not finish: {outcome.why()}"}, "rows": [], "plots": []}
        result["benchmarks"][op] = done["benchmark"]
        result["verification"] += done["rows"] + died
        result["plots"] += done["plots"]
    skipped = "no CUDA device; verification ran in Triton's interpreter at small sizes" \
        if device == "cpu" else "benchmarks disabled (--no-bench)"
    for op in ops:
        result["benchmarks"].setdefault(op, {"skipped": skipped})
    # A torch.compile peer (benchmarks) switches Triton to torch's ptxas for the rest of the
    # process: the kernels compiled after it were assembled by that one (docs/design.md,
    # "Which ptxas"). Isolated, each part starts on Triton's own; a part that switched says so.
    now = next((o.ptxas for o in outcomes if o.ptxas and o.ptxas != result["environment"]["ptxas"]), None) or ptxas()
    if now != result["environment"]["ptxas"]:
        result["environment"]["ptxas"] = f"{result['environment']['ptxas']}, then {now} once torch.compile ran"
    result["wall_seconds"] = round(time.time() - t0, 1)
    rep.write_json(out / "report.json", result)
    rep.write_markdown(out / "report.md", result)
    return result


def verify_op(op: str, quick: bool, device: str, show_progress: bool) -> list[dict]:
    """One op's verification rows; a section that raises is one failed row."""
    try:
        return section(op).verify(quick, device, _progress(show_progress))
    except Exception as exc:   # noqa: BLE001  reported as a failure; the other ops still run
        return [_raised_row(op, exc)]


def benchmark_op(op: str, quick: bool, show_progress: bool, out_dir: str) -> dict:
    """One op's benchmark dict, the failed rows it adds (tilefuse's own failed timings, a
    section that raised) and the plots it wrote into ``out_dir``."""
    try:   # the section's import too: it raises where its module cannot load
        mod = section(op)
        b = mod.benchmark(quick, _progress(show_progress))
    except Exception as exc:   # noqa: BLE001  reported; the other ops still run
        return {"benchmark": {"skipped": f"the benchmark raised {type(exc).__name__}: {exc}"},
                "rows": [_raised_row(op, exc, "benchmark")], "plots": []}
    # tilefuse's own rows that failed are failures of the check (exit status 1), peers' not
    rows, plots = failed_tilefuse_rows(op, b), []
    if hasattr(mod, "plots"):
        try:   # a plot that fails does not lose the run's report
            plots = mod.plots(Path(out_dir), b)
        except Exception as exc:   # noqa: BLE001  reported as a failed row
            rows.append(_raised_row(op, exc, "plots"))
    return {"benchmark": b, "rows": rows, "plots": plots}


def _run_parts(isolate: bool, parts: list, timeout: float | None) -> list:
    """Each part's tilefuse.isolate.Outcome: ``fn(op, **kwargs)`` here, or with ``isolate`` in
    a child process (one for all the parts, a fresh one after a part that crashed it or ran
    past ``timeout`` seconds)."""
    from .. import isolate as iso
    if not isolate:
        return [iso.Outcome(ok=True, value=fn(op=op, **kwargs)) for _, op, fn, kwargs in parts]
    return iso.run_parts([(f"{fn.__module__}:{fn.__qualname__}", {"op": op, **kwargs})
                          for _, op, fn, kwargs in parts], timeout)


def _died_row(op: str, part: str, outcome) -> dict:
    """A failed verification row for a part whose child process died, raised outside the
    section or lost the CUDA context (tilefuse.isolate.Outcome): a crash after its rows were
    written still fails the check."""
    return {"op": op, "path": f"the {part} section", "case": "all", "ok": False, "errors": {},
            "worst_error_over_bound": float("inf"), "detail": outcome.why()[:600]}


def tuning_coverage(ops) -> dict:
    """The tuning table's coverage of each op's standard grid on this machine's device
    (tuning.coverage), or {"error": why} if it cannot be read: a key without an entry runs
    its baseline, which on a GPU without a built-in table is every key until `tilefuse tune`."""
    from .. import tuning
    try:
        return tuning.coverage(ops)
    except Exception as exc:   # noqa: BLE001  reported; the check goes on
        return {"error": f"{type(exc).__name__}: {exc}"}


def coverage_lines(cov: dict, on_gpu: bool = True) -> list[str]:
    """One line on the table: which built-in file, keys covered per op, and the command that
    sweeps the rest (``on_gpu``; without a CUDA device `tilefuse tune` cannot run, and the
    line says so instead)."""
    if "error" in cov:
        return [f"tuning table: could not be read ({cov['error']})"]
    fams = cov["families"]
    counts = ", ".join(f"{name} {f['covered']}/{f['grid']}" for name, f in fams.items())
    where = f"built-in {cov['builtin']}" if cov["builtin"] else "no built-in table for this device"
    line = f"tuning table for {cov['gpu']}: {where}; standard keys covered: {counts}"
    missing = [name for name, f in fams.items() if f["missing"]]
    if missing and not on_gpu:
        line += "; no CUDA device here: the entries apply on their GPU, and `tilefuse tune` sweeps on one"
    elif missing:
        commands = (["tilefuse tune --all-defaults"] if set(missing) == set(OPS)
                    else [f"tilefuse tune --all-defaults --op {name}" for name in missing])
        line += f"; the others run their baselines (untuned): {', '.join(f'`{c}`' for c in commands)} sweeps them"
    return [line]


def failed_tilefuse_rows(op: str, bench: dict) -> list[dict]:
    """A failed verification row for each benchmark row of ``bench`` (any nesting of dicts and
    lists) that times tilefuse's code and failed: a row with status "failed" whose provider is
    tilefuse's (``"ours": True``, or without that field a name starting with "tilefuse"), or a
    per-role row whose ``tilefuse_error`` is set. A peer that fails is reported in its table;
    tilefuse failing fails the check."""
    out, stack = [], [bench]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            provider = node.get("provider")
            ours = node.get("ours", isinstance(provider, str) and provider.startswith("tilefuse"))
            if node.get("tilefuse_error"):   # a GEMM role's row: tilefuse's and the peer's timings side by side
                provider, node = f"tilefuse {node.get('role', '')}".strip(), {**node, "error": node["tilefuse_error"]}
            elif not (node.get("status") == "failed" and ours):
                provider = None
            if provider is not None:
                shape = ", ".join(f"{k} {node[k]}" for k in ("experts", "tokens", "hidden", "ffn", "lmax",
                                                             "focus_dim", "edges", "rows", "cols", "mode", "pass")
                                  if k in node)
                out.append({"op": op, "path": f"benchmark: {provider}", "case": shape or "-", "ok": False,
                            "errors": {}, "worst_error_over_bound": float("inf"),
                            "detail": f"the benchmark row failed: {node.get('error', '')}"[:400]})
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return out


def _raised_row(op: str, exc: Exception, part: str = "verification") -> dict:
    """A failed verification row for a section that raised instead of reporting."""
    return {"op": op, "path": f"the {part} section", "case": "all", "ok": False, "errors": {},
            "worst_error_over_bound": float("inf"),
            "detail": f"raised {type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"}


def summary(result: dict, out_dir) -> str:
    ver = result["verification"]
    failed = [r for r in ver if not r["ok"]]
    env = result["environment"]
    lines = [f"tilefuse {env['tilefuse']} ({env.get('git_commit') or 'no checkout'}) on {env['device']}; "
             f"torch {env['torch']}, triton {env['triton']}",
             f"verification: {len(ver) - len(failed)}/{len(ver)} passed"]
    if env.get("cuda_available") and "tuning" in result:   # on the CPU the table picks nothing that runs
        lines += coverage_lines(result["tuning"])
    lines += [f"  FAIL {r['op']} {r['path']} {r['case']}: {r['detail']}" for r in failed]
    for op, b in result["benchmarks"].items():
        if "skipped" in b:
            lines.append(f"{op} benchmark: no timing taken ({b['skipped']})")
        else:
            lines += section(op).benchmark_summary(b)
    lines.append(f"report: {Path(out_dir) / 'report.md'} ({result['wall_seconds']} s)")
    return "\n".join(lines)
