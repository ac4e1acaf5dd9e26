"""`tilefuse check`: does this build work on this machine, and how fast is it.

Verifies every op and path against float64 references (in Triton's interpreter at small sizes
when there is no GPU), benchmarks against the installed peers on a GPU, and writes
``report.md``, ``report.json`` and PNG plots.
"""

from __future__ import annotations

import time
from pathlib import Path

import torch

from .env import environment


def _progress(enabled: bool):
    def wrap(items, desc=""):
        try:
            from tqdm import tqdm
        except ImportError:
            return items
        return tqdm(items, desc=desc, disable=not enabled, leave=False)
    return wrap


def run_check(out_dir: str | Path = "tilefuse-report", *, quick: bool = False, bench: bool = True,
              show_progress: bool = True) -> dict:
    """Run verification (and benchmarks on a GPU), write the report, return it."""
    from . import dyt, grouped, so2, report as rep

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    progress = _progress(show_progress)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    t0 = time.time()
    result = {"environment": environment(), "verification": [], "benchmarks": {}, "plots": []}
    result["verification"] += dyt.verify(quick, device, progress)
    result["verification"] += so2.verify(quick, device, progress)
    result["verification"] += grouped.verify(quick, device, progress)
    if device == "cuda" and bench:
        result["benchmarks"]["dyt"] = dyt.benchmark(quick, progress)
        if rep.plot_dyt(out / "dyt_bandwidth.png", result["benchmarks"]["dyt"]):
            result["plots"].append("dyt_bandwidth.png")
        result["benchmarks"]["so2_mixing_stack"] = so2.benchmark(quick, progress)
        result["benchmarks"]["grouped_glu_mlp"] = grouped.benchmark(quick, progress)
    else:
        reason = "no CUDA device; verification ran in Triton's interpreter at small sizes" \
            if device == "cpu" else "benchmarks disabled (--no-bench)"
        result["benchmarks"]["dyt"] = {"skipped": reason}
        result["benchmarks"]["so2_mixing_stack"] = {"skipped": reason}
        result["benchmarks"]["grouped_glu_mlp"] = {"skipped": reason}
    result["wall_seconds"] = round(time.time() - t0, 1)
    rep.write_json(out / "report.json", result)
    rep.write_markdown(out / "report.md", result)
    return result


def summary(result: dict, out_dir) -> str:
    ver = result["verification"]
    failed = [r for r in ver if not r["ok"]]
    env = result["environment"]
    lines = [f"tilefuse {env['tilefuse']} ({env.get('git_commit') or 'no checkout'}) on {env['device']}; "
             f"torch {env['torch']}, triton {env['triton']}",
             f"verification: {len(ver) - len(failed)}/{len(ver)} passed"]
    lines += [f"  FAIL {r['op']} {r['path']} {r['case']}: {r['detail']}" for r in failed]
    for op, b in result["benchmarks"].items():
        if "skipped" in b:
            lines.append(f"{op} benchmark: no timing taken ({b['skipped']})")
            continue
        if op == "grouped_glu_mlp":
            for r in b["rows"]:
                if r["status"] == "ok":
                    lines.append(f"grouped E{r['experts']} T{r['tokens']} {r['provider']}: {r['tflops']:.0f} TFLOP/s")
            continue
        if op == "so2_mixing_stack":
            for r in b["rows"]:
                if r["status"] == "ok":
                    lines.append(f"so2 L{r['lmax']} C{r['focus_dim']} {r['provider']}: {r['ms']:.3f} ms "
                                 f"(table picks {r['table_picks']})")
            continue
        ours = [r for r in b["rows"] if r["provider"] == "tilefuse" and r["status"] == "ok"
                and r.get("mode") == "graph"]
        for pass_ in ("fwd", "fwd+bwd"):
            for dtype in ("fp32", "bf16"):
                fr = [r["fraction_of_copy"] for r in ours if r["pass"] == pass_ and r["dtype"] == dtype]
                if fr:
                    lines.append(f"{op} {pass_} {dtype}: {min(fr):.0%}-{max(fr):.0%} of the copy ceiling "
                                 "(graph replay)")
    lines.append(f"report: {Path(out_dir) / 'report.md'} ({result['wall_seconds']} s)")
    return "\n".join(lines)
