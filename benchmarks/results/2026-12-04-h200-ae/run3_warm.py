"""Run 3's warm-up (GPU): the -ac folder's warm.py (every choice of the sweep run once, one
process per epilogue key, so that Triton compiles side by side) over every key of the standard
grid. Its own key list is the keys not yet in the table, and the built-in table covers all of
them here; the sweep that follows runs with --force.

    PYTHONPATH=src python3 benchmarks/results/2026-12-04-h200-ae/run3_warm.py --jobs 8
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "2026-12-03-h200-ac"))
import warm  # noqa: E402


def every_key():
    from tilefuse.ops.grouped_glu_mlp.tune import FAMILY
    out = {}
    for p in FAMILY.default_problems():
        out.setdefault((p.activation, p.interleave, p.has_bias), []).append(p)
    return out


if __name__ == "__main__":
    warm._uncovered = every_key
    warm.main()
