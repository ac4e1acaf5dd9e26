"""Tables of run 1's layout.jsonl: per shape and counts, each candidate's median over the
processes of each tree (grouped, global) and grouped / global; the whole op's fp8_block / bf16
ratio within each tree's processes (bf16 timed beside it in the same process).

    python3 benchmarks/results/2026-12-05-h200-al/summarize.py OUT/run1/layout.jsonl
"""
import json
import statistics
import sys
from collections import defaultdict

KEYS = ("dy pair", "dz cols", "dW1 fp8", "dW2 fp8", "dW1 bf16 cutlass", "dW2 bf16 cutlass", "op fp8_block", "op bf16",
        "op fp8_block halves", "op bf16 halves")


def main(path):
    runs = defaultdict(lambda: defaultdict(list))   # (shape, routed) -> (tag, key) -> [ms]
    errs = defaultdict(float)
    for line in open(path):
        r = json.loads(line)
        case = (r["shape"], r["routed"])
        for k in KEYS:
            runs[case][(r["tag"], k)].append(r["ms"][k])
        runs[case][(r["tag"], "fp8/bf16")].append(r["ms"]["op bf16"] / r["ms"]["op fp8_block"])
        runs[case][(r["tag"], "fp8/bf16 halves")].append(r["ms"]["op bf16 halves"] / r["ms"]["op fp8_block halves"])
        errs[(r["tag"], "dW")] = max(errs[(r["tag"], "dW")], *r["err"].values())
    print("| shape | counts | " + " | ".join(f"{k} global / grouped (us)" for k in KEYS[:4])
          + " | op fp8 global / grouped (ms) | fp8/bf16 global | fp8/bf16 grouped"
          + " | halves: op fp8 global / grouped (ms) | fp8/bf16 global | fp8/bf16 grouped |")
    print("|---" * 12 + "|")
    for (shape, routed), d in sorted(runs.items()):
        med = {k: statistics.median(v) for k, v in d.items()}
        cells = []
        for k in KEYS[:4]:
            g, n = med.get(("global", k)), med.get(("grouped", k))
            cells.append("-" if g is None or n is None else f"{g * 1e3:.0f} / {n * 1e3:.0f} ({g / n:.3f}x)")
        g, n = med.get(("global", "op fp8_block")), med.get(("grouped", "op fp8_block"))
        cells.append("-" if g is None or n is None else f"{g:.3f} / {n:.3f} ({g / n:.3f}x)")
        cells += [f"{med[(t, 'fp8/bf16')]:.3f}x" if (t, "fp8/bf16") in med else "-" for t in ("global", "grouped")]
        g, n = med.get(("global", "op fp8_block halves")), med.get(("grouped", "op fp8_block halves"))
        cells.append("-" if g is None or n is None else f"{g:.3f} / {n:.3f} ({g / n:.3f}x)")
        cells += [f"{med[(t, 'fp8/bf16 halves')]:.3f}x" if (t, "fp8/bf16 halves") in med else "-"
                  for t in ("global", "grouped")]
        print(f"| {shape} | {'routed' if routed else 'balanced'} | " + " | ".join(cells) + " |")
    print("largest relative wgrad error against float64 (of the sampled experts): "
          + ", ".join(f"{t} {v:.2e}" for (t, _), v in sorted(errs.items())))


if __name__ == "__main__":
    main(sys.argv[1])
