"""Issue 16 (GPU): fp8_block as users call it with the fc2 dgrad + dGLU through the
warp-specialised kernel (ws_kernels.TAKES_DGLU, the default now) and through the Triton dGLU
launch as before (``fp8_block triton dGLU``: TAKES_DGLU False while the provider's step runs and
is captured), beside bf16 tilefuse and the compiled composition: benchmarks/
grouped_compose_gpu_check.py with that provider added, every provider's ratio to ``tilefuse``,
``compiled composition`` and ``fp8_block triton dGLU`` printed to 3 decimals. Arguments as that
script's (2026-12-04-h200-ai/as_called_glu.py's form for the GLU).

    PYTHONPATH=src python3 benchmarks/results/2026-12-07-h200-bf/run4_as_called_dglu.py --providers "tilefuse,fp8_block" ...
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))   # benchmarks/
import grouped_compose_gpu_check as check  # noqa: E402

from tilefuse.ops.grouped_glu_mlp import ws_kernels  # noqa: E402

_providers_for = check.providers_for


def _triton_dglu(step):
    def run():
        ws_kernels.TAKES_DGLU = False
        try:
            return step()
        finally:
            ws_kernels.TAKES_DGLU = True
    return run


def providers_for(i, interleave, activation="swiglu", names=check.PROVIDERS, *args, **kwargs):
    out = _providers_for(i, interleave, activation, names, *args, **kwargs)
    for name in ("fp8_block", "fp8_block one stream"):   # the latter with the check's --one-stream
        if name in out:
            out[name.replace("fp8_block", "fp8_block triton dGLU")] = _triton_dglu(out[name])
    return out


check.providers_for = providers_for
_interleaved = check.timing.interleaved


def interleaved(providers, **kwargs):
    results = _interleaved(providers, **kwargs)
    for base_name in ("tilefuse", "compiled composition", "fp8_block triton dGLU"):
        base = results.get(base_name)
        if isinstance(base, check.timing.Timing):
            print(f"  ratios to {base_name}: " + ", ".join(
                f"{n} {check.timing.ratio(base, r):.3f}x" for n, r in results.items()
                if isinstance(r, check.timing.Timing)), flush=True)
    return results


check.timing.interleaved = interleaved

if __name__ == "__main__":
    sys.exit(check.main())
