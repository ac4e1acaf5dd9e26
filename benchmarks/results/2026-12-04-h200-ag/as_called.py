"""Issue 16 (GPU): the op as called with the backward's weight gradients on a second stream
(compose "Two streams") against the same op on one stream and the compiled composition:
benchmarks/grouped_compose_gpu_check.py with one more provider, ``tilefuse one stream``
(compose.BESIDE off while the provider's step runs and is captured). Arguments as that
script's.

    PYTHONPATH=src python3 benchmarks/results/2026-12-04-h200-ag/as_called.py --providers "compiled composition,tilefuse" ...
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))   # benchmarks/
import grouped_compose_gpu_check as check  # noqa: E402

from tilefuse.ops.grouped_glu_mlp import compose  # noqa: E402

_providers_for = check.providers_for


def providers_for(i, interleave, activation="swiglu", names=check.PROVIDERS):
    out = _providers_for(i, interleave, activation, names)
    if "tilefuse" in out:
        def one_stream(step=out["tilefuse"]):
            compose.BESIDE = False
            try:
                return step()
            finally:
                compose.BESIDE = True
        out["tilefuse one stream"] = one_stream
    return out


check.providers_for = providers_for
_interleaved = check.timing.interleaved


def interleaved(providers, **kwargs):
    """check's timing, then each provider's ratio to the compiled composition to 3 decimals."""
    results = _interleaved(providers, **kwargs)
    base = results.get("compiled composition")
    if isinstance(base, check.timing.Timing):
        print("  ratios: " + ", ".join(f"{name} {check.timing.ratio(base, r):.3f}x" for name, r in results.items()
                                       if isinstance(r, check.timing.Timing)), flush=True)
    return results


check.timing.interleaved = interleaved

if __name__ == "__main__":
    sys.exit(check.main())
