"""Write the check report: report.json (everything), report.md (the "Testing Done" section a
kernel pull request needs) and PNG plots."""

from __future__ import annotations

import json
import math
from pathlib import Path


def _fmt_err(v: float) -> str:
    return "inf" if v == math.inf else f"{v:.1e}"


def write_json(path: Path, report: dict) -> None:
    path.write_text(json.dumps(report, indent=2, default=str, allow_nan=True))


def write_markdown(path: Path, report: dict) -> None:
    env = report["environment"]
    lines = ["# tilefuse check", "", "## Environment", ""]
    lines += [f"- {k}: {v}" for k, v in env.items()]
    ver = report["verification"]
    n_ok = sum(r["ok"] for r in ver)
    if "ops" in report:
        lines += ["", f"Ops: {', '.join(report['ops'])}"]
    if not ver:
        lines += ["", "## Verification: not run (`tilefuse bench`)"]
    lines += [] if not ver else ["", f"## Verification: {n_ok}/{len(ver)} passed", "",
              "Errors are normwise relative errors against a float64 reference; 'worst/bound' is the "
              "largest elementwise error as a fraction of its derived bound (<= 1 passes).", "",
              "| op | path | case | result | errors | worst/bound | detail |", "|---|---|---|---|---|---|---|"]
    for r in ver:
        errs = ", ".join(f"{k} {_fmt_err(v)}" for k, v in r["errors"].items())
        lines.append(f"| {r['op']} | {r['path']} | {r['case']} | {'pass' if r['ok'] else '**FAIL**'} | "
                     f"{errs} | {r['worst_error_over_bound']:.2f} | {r['detail']} |")
    for op, b in report.get("benchmarks", {}).items():
        lines += ["", f"## Benchmark: {op}", ""]
        if "skipped" in b:
            lines.append(f"No timing was taken: {b['skipped']}.")
            continue
        if op == "grouped_glu_mlp":
            lines += ["bf16 forward+backward (3x forward FLOPs), CUDA-graph replay interleaved (the per-expert loop "
                      "eagerly: it reads the counts on the host); host p50 per forward call (synchronised, "
                      "submission only, 300 calls) and per forward+backward call.", "",
                      "| experts | tokens | H | F | provider | ms | spread | TFLOP/s | host p50 fwd (us) "
                      "| host p50 fwd+bwd (us) |",
                      "|---|---|---|---|---|---|---|---|---|---|"]
            for r in b["rows"]:
                t = (f"{r['ms']:.3f} | {r['spread']:.1%} | {r['tflops']:.0f}" if r["status"] == "ok"
                     else f"failed | | {r['error']}")
                host = " | ".join("" if r.get(k) is None else f"{r[k]:.0f}"
                                  for k in ("host_p50_us_fwd", "host_p50_us_fwd_bwd"))
                lines.append(f"| {r['experts']} | {r['tokens']} | {r['hidden']} | {r['ffn']} | {r['provider']} | "
                             f"{t} | {host} |")
            continue
        if op == "so2_mixing_stack":
            lines += ["fp32, F 2, CUDA-graph replay, interleaved. 'layer': one gated layer's backward (relay: "
                      "sigma + pointwise + transposed GEMM; fused: both column passes); 'backward': the whole "
                      "force backward (grad of u0 and alpha, three layers). 'vs relay' is the relay's time over "
                      "the row's at the same scope (> 1: faster than the relay). 'floor/copy': the fused floor's "
                      f"bytes (read g, z; write g_next) at the row's time, as a fraction of the copy ceiling "
                      f"measured in this run ({b.get('copy_ceiling_gbs', float('nan')):.0f} GB/s).", "",
                      "| scope | lmax | Cf | edges | provider | ms | spread | vs relay | floor/copy | table picks |",
                      "|---|---|---|---|---|---|---|---|---|---|"]
            relay_ms = {(r.get("scope"), r["lmax"], r["focus_dim"]): r["ms"] for r in b["rows"]
                        if r["status"] == "ok" and r["provider"] in ("relay", "relay layer")}
            for r in b["rows"]:
                scope = r.get("scope", "backward")
                if r["status"] != "ok":
                    lines.append(f"| {scope} | {r['lmax']} | {r['focus_dim']} | {r['edges']} | {r['provider']} | "
                                 f"failed | | | | {r['error']} |")
                    continue
                base = relay_ms.get((r.get("scope"), r["lmax"], r["focus_dim"]))
                vs = f"{base / r['ms']:.2f}" if base else ""
                floor = r.get("fused_floor_fraction_of_copy")
                lines.append(f"| {scope} | {r['lmax']} | {r['focus_dim']} | {r['edges']} | {r['provider']} | "
                             f"{r['ms']:.3f} | {r['spread']:.1%} | {vs} | "
                             f"{'' if floor is None else f'{floor:.0%}'} | {r['table_picks']} |")
            continue
        ceil = ", ".join(f"{k} {v:.0f} GB/s" for k, v in b["copy_ceiling_gbs"].items())
        lines += [f"{b['numel']} elements per tensor. Device-to-device copy ceiling measured in this run: {ceil}. "
                  "Mode 'graph': CUDA-graph replay (device time); 'eager loop': per-call Python calls "
                  "(adds host overhead). Time is the median over interleaved rounds (spread = (max-min)/median); 'vs tilefuse' is "
                  "the provider's time over tilefuse's (> 1: tilefuse is faster). The config column names the "
                  "tilefuse config that ran (fwd / bwd); '(untuned)' marks a shape the tuning table does not "
                  "cover, where the heuristic default ran.", "",
                  "| dtype | width | pass | provider | mode | ms | spread | GB/s | of copy | vs tilefuse | config / error |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in b["rows"]:
            if r["status"] != "ok":
                lines.append(f"| {r['dtype']} | {r['width']} | {r['pass']} | {r['provider']} | {r.get('mode', '')} "
                             f"| failed | | | | | {r['error']} |")
                continue
            lines.append(f"| {r['dtype']} | {r['width']} | {r['pass']} | {r['provider']} | {r.get('mode', '')} | "
                         f"{r['ms']:.4f} | "
                         f"{r['spread']:.1%} | {r['gbs']:.0f} | {r['fraction_of_copy']:.1%} | "
                         f"{r.get('tilefuse_speedup', float('nan')):.2f} | {r.get('config', '')} |")
    for name in report.get("plots", []):
        lines += ["", f"![{name}]({name})"]
    path.write_text("\n".join(lines) + "\n")


def plot_dyt(path: Path, bench: dict) -> bool:
    """Fraction of the copy ceiling against width, one line per provider, one panel per
    (dtype, pass). Returns False when matplotlib is unavailable."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    rows = [r for r in bench["rows"] if r["status"] == "ok"]
    panels = [(d, p) for d in ("fp32", "bf16") for p in ("fwd", "fwd+bwd")]
    fig, axes = plt.subplots(2, 2, figsize=(11, 8), sharex=True, sharey=True)
    for ax, (dtype, pass_) in zip(axes.flat, panels):
        for provider in sorted({r["provider"] for r in bench["rows"]}):
            for mode in ("graph", "eager loop"):
                pts = sorted((r["width"], r["fraction_of_copy"]) for r in rows if r["dtype"] == dtype
                             and r["pass"] == pass_ and r["provider"] == provider and r.get("mode") == mode)
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o",
                            ls="-" if mode == "graph" else ":", label=f"{provider} ({mode})")
        ax.set_xscale("log", base=2)
        ax.set_title(f"dyt {pass_}, x {dtype}, fp32 params")
        ax.axhline(1.0, color="grey", lw=0.5)
        ax.grid(alpha=0.3)
        ax.set_xlabel("width (columns)")
        ax.set_ylabel("fraction of copy ceiling")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True
