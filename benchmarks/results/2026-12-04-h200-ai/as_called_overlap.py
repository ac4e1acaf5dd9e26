"""Issue 16 (GPU): fp8_block as users call it with the warp-specialised store GEMM's two
schedules (ws_kernels.OVERLAP off, as shipped, and on, set while the provider's step runs and is
captured), beside bf16 tilefuse: benchmarks/grouped_compose_gpu_check.py with one more provider
(``fp8_block overlap``), and every provider's ratio to ``tilefuse`` printed to 3 decimals.
Arguments as that script's.

    PYTHONPATH=src python3 benchmarks/results/2026-12-04-h200-ai/as_called_overlap.py --providers "tilefuse,fp8_block" ...

Ran at tree dedbeaf (run 1). ws_kernels.OVERLAP is gone since 2e8bf58 (chunk pairs are
the only schedule), so this program runs at that tree only; run 2's ws_glu_roles.py times
the shipped kernel.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))   # benchmarks/
import grouped_compose_gpu_check as check  # noqa: E402

from tilefuse.ops.grouped_glu_mlp import ws_kernels  # noqa: E402

_providers_for = check.providers_for


def _overlapped(step):
    def run():
        ws_kernels.OVERLAP = True
        try:
            return step()
        finally:
            ws_kernels.OVERLAP = False
    return run


def providers_for(i, interleave, activation="swiglu", names=check.PROVIDERS, *args, **kwargs):
    out = _providers_for(i, interleave, activation, names, *args, **kwargs)
    if "fp8_block" in out:
        out["fp8_block overlap"] = _overlapped(out["fp8_block"])
    return out


check.providers_for = providers_for
_interleaved = check.timing.interleaved


def interleaved(providers, **kwargs):
    results = _interleaved(providers, **kwargs)
    base = results.get("tilefuse")
    if isinstance(base, check.timing.Timing):
        print("  ratios to tilefuse: " + ", ".join(f"{n} {check.timing.ratio(base, r):.3f}x"
                                                   for n, r in results.items() if isinstance(r, check.timing.Timing)),
              flush=True)
    fp8, ov = results.get("fp8_block"), results.get("fp8_block overlap")
    if isinstance(fp8, check.timing.Timing) and isinstance(ov, check.timing.Timing):
        print(f"  fp8_block overlap / shipped: {check.timing.ratio(fp8, ov):.3f}x", flush=True)
    return results


check.timing.interleaved = interleaved

if __name__ == "__main__":
    sys.exit(check.main())
