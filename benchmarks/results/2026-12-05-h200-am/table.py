"""Issue 16 (GPU): fp8_block's grouped column-wise quantizer reading each block's rows from a
table that one small kernel makes per launch (a869d17, ``--tag table``) against every program
scanning the counts itself (9525667, ``--tag scan``, from .snap/src), one tree per process,
alternating (run1.sh). Both trees with recipes.PAIR_ROWS_COLS False (the default since
73a9bb5; 9525667's was True, so it is set here), so x's, h's and dy's column-wise copies go
through the kernel under test as the op now runs them.

Per case (shape, balanced / routed counts), -al's layout.py ``case``: dy's row-wise and
column-wise copies (recipes.quantize_rows_cols, two launches here), dz's column-wise copy, the
fp8 weight gradients from those copies (checked against float64 GEMMs of the dequantized
copies), CUTLASS's bf16 wgrads on the same tensors, and the whole op forward + backward as
called, fp8_block and bf16, at interleave 32 and in the halves layout (3 interleaved rounds of
``triton.testing.do_bench`` medians); the routed fp8 step at ``--profile`` shapes kernel by
kernel. Then, per shape with balanced counts, dy's two copies from one paired launch
(quant.launch.fp8_block_rows_cols) against the two launches, now that neither scans.

    PYTHONPATH=src python3 benchmarks/results/2026-12-05-h200-am/table.py --tag table --json F
    python3 benchmarks/results/2026-12-05-h200-am/table.py --summarize F

``--smoke`` runs one tiny problem on the CPU (TRITON_INTERPRET=1): a check of the script.
"""
import argparse
import importlib.util
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

KEYS = ("dy pair", "dz cols", "dW1 fp8", "dW2 fp8", "op fp8_block", "op bf16", "op fp8_block halves",
        "op bf16 halves")


def load_layout():
    """-al's layout.py as a module (its cases, counts, timing and checks)."""
    path = Path(__file__).resolve().parents[1] / "2026-12-05-h200-al" / "layout.py"
    spec = importlib.util.spec_from_file_location("al_layout", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def pair_case(layout, shape):
    """(µs paired, µs separate, bitwise): dy's two copies, balanced counts."""
    import torch
    from tilefuse.ops.grouped_glu_mlp import recipes
    from tilefuse.quant import launch as quant_launch
    E, T, H, _ = layout.SHAPES[shape]
    dy = torch.randn(T, H, generator=torch.Generator().manual_seed(T)).bfloat16().to(layout.DEVICE)
    c = torch.full((E,), T // E, dtype=torch.int32, device=layout.DEVICE)
    c[0] += T - int(c.sum())
    paired = lambda: quant_launch.fp8_block_rows_cols(dy, False, c)                 # noqa: E731
    separate = lambda: recipes.quantize_rows_cols("fp8_block", dy, c)               # noqa: E731
    (rd, rs), (cd, cs) = paired()
    a, b = separate()
    same = (torch.equal(rd.view(torch.uint8), a.data) and torch.equal(rs, a.scales)
            and torch.equal(cd.view(torch.uint8), b.data) and torch.equal(cs, b.scales))
    times = {"paired": [], "separate": []}
    for _ in range(1 if layout.DEVICE == "cpu" else 3):
        times["paired"].append(layout.bench(paired))
        times["separate"].append(layout.bench(separate))
    return statistics.median(times["paired"]) * 1e3, statistics.median(times["separate"]) * 1e3, same


def summarize(path):
    runs = defaultdict(lambda: defaultdict(list))
    pairs = defaultdict(lambda: defaultdict(list))
    for line in open(path):
        r = json.loads(line)
        if r.get("kind") == "pair":
            for k in ("paired", "separate"):
                pairs[r["shape"]][(r["tag"], k)].append(r[k])
            continue
        case = (r["shape"], r["routed"])
        for k in KEYS:
            runs[case][(r["tag"], k)].append(r["ms"][k])
    med = lambda v: statistics.median(v) if v else float("nan")   # noqa: E731
    names = {"dy pair": "dy rows + cols (two launches)"}
    print("| shape | counts | " + " | ".join(f"{names.get(k, k)}: scan / table" for k in KEYS[:6])
          + " | fp8/bf16 scan | fp8/bf16 table | halves fp8: scan / table |")
    print("|---" * 11 + "|")
    for (shape, routed), d in sorted(runs.items()):
        cells = []
        for k in (*KEYS[:6], "op fp8_block halves"):
            s, t = med(d[("scan", k)]), med(d[("table", k)])
            unit = 1e3 if not k.startswith("op") else 1
            cells.append(f"{s * unit:.{0 if unit > 1 else 3}f} / {t * unit:.{0 if unit > 1 else 3}f} ({s / t:.3f}x)")
        ratios = [med(d[(tag, "op bf16")]) / med(d[(tag, "op fp8_block")]) for tag in ("scan", "table")]
        print(f"| {shape} | {'routed' if routed else 'balanced'} | " + " | ".join(cells[:6])
              + f" | {ratios[0]:.3f}x | {ratios[1]:.3f}x | {cells[6]} |")
    print("\ndy's two copies, balanced counts (µs): paired launch / two launches, per tree")
    for shape, d in sorted(pairs.items()):
        print(f"  shape {shape}: " + "  ".join(
            f"{tag} {med(d[(tag, 'paired')]):.1f} / {med(d[(tag, 'separate')]):.1f}"
            f" ({med(d[(tag, 'separate')]) / med(d[(tag, 'paired')]):.3f}x)" for tag in ("scan", "table")))
    print("(µs or ms; 'x' above 1: the table tree faster, or for the pairs the paired launch faster)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tag", help="the tree's name in the output: table (a869d17 and later) or scan (9525667)")
    ap.add_argument("--shapes", default="1,2,3")
    ap.add_argument("--json", help="append one JSON line per case here")
    ap.add_argument("--profile", default="3", help="shapes whose routed fp8 step is profiled ('' for none)")
    ap.add_argument("--smoke", action="store_true", help="one tiny problem on the CPU (interpreter)")
    ap.add_argument("--summarize", metavar="JSONL", help="print the tables of a finished run and exit")
    args = ap.parse_args()
    if args.summarize:
        return summarize(args.summarize)
    if args.tag not in ("table", "scan"):
        ap.error("--tag must be table or scan")
    import torch
    import triton
    from tilefuse.ops.grouped_glu_mlp import recipes
    from tilefuse.quant import launch as quant_launch
    tree = "table" if hasattr(quant_launch, "_group_table") else "scan"
    if tree != args.tag:
        sys.exit(f"--tag {args.tag} but this tree's grouped quantizer is the {tree} form")
    recipes.PAIR_ROWS_COLS = False
    layout = load_layout()
    layout.PROFILE.update(int(v) for v in args.profile.split(",") if v.strip())
    if args.smoke:
        layout.DEVICE, args.shapes = "cpu", "0"
        layout.PROFILE.add(0)
    print(torch.cuda.get_device_name() if layout.DEVICE == "cuda" else "cpu", torch.__version__, triton.__version__,
          args.tag, flush=True)
    for s in map(int, args.shapes.split(",")):
        for routed in (False, True):
            r = layout.case(s, routed)
            r["tag"] = args.tag
            ms = r["ms"]
            print(f"{args.tag:5s} shape {s} {'routed  ' if routed else 'balanced'} "
                  + " ".join(f"{k.replace(' ', '_')}={v * 1e3:.1f}us" for k, v in ms.items() if not k.startswith("op"))
                  + " " + " ".join(f"{k.replace(' ', '_')}={v:.3f}ms" for k, v in ms.items() if k.startswith("op"))
                  + f" err dW1={r['err']['dW1']:.2e} dW2={r['err']['dW2']:.2e}", flush=True)
            if args.json:
                with open(args.json, "a") as f:
                    f.write(json.dumps(r) + "\n")
        p, sep, same = pair_case(layout, s)
        print(f"{args.tag:5s} shape {s} dy copies: paired={p:.1f}us separate={sep:.1f}us bitwise={same}", flush=True)
        if args.json:
            with open(args.json, "a") as f:
                f.write(json.dumps({"kind": "pair", "tag": args.tag, "shape": s, "paired": p, "separate": sep,
                                    "bitwise": same}) + "\n")


if __name__ == "__main__":
    main()
