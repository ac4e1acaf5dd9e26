"""Issue 16 (GPU): the op as called with the second stream (ops/grouped_glu_mlp/streams.py) on
and off, bf16 (compose route: the Gluon weight gradients beside the dgrads) and fp8_block
(kernels route: W2's quantizer beside FC1, the weight gradients and their column-wise
quantizers beside the dgrads), at the side stream's default and high priority:
benchmarks/grouped_compose_gpu_check.py with four more providers (streams.BESIDE /
streams.PRIORITY set while each provider's step runs and is captured), and every provider's
ratio to a base provider printed to 3 decimals (``compiled composition`` where timed, else
``tilefuse``). Arguments as that script's.

    PYTHONPATH=src python3 benchmarks/results/2026-12-04-h200-ag/as_called_streams.py --providers "tilefuse,fp8_block" ...
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))   # benchmarks/
import grouped_compose_gpu_check as check  # noqa: E402

from tilefuse.ops.grouped_glu_mlp import streams  # noqa: E402

_providers_for = check.providers_for


def _with(step, beside, priority):
    def run():
        streams.BESIDE, streams.PRIORITY = beside, priority
        try:
            return step()
        finally:
            streams.BESIDE, streams.PRIORITY = True, 0
    return run


def providers_for(i, interleave, activation="swiglu", names=check.PROVIDERS):
    out = _providers_for(i, interleave, activation, names)
    for name in ("tilefuse", "fp8_block"):
        if name in out:
            out[f"{name} one stream"] = _with(out[name], False, 0)
            out[f"{name} high priority"] = _with(out[name], True, -1)
    return out


check.providers_for = providers_for
_interleaved = check.timing.interleaved


def interleaved(providers, **kwargs):
    results = _interleaved(providers, **kwargs)
    name = "compiled composition" if "compiled composition" in results else "tilefuse"
    base = results.get(name)
    if isinstance(base, check.timing.Timing):
        print(f"  ratios to {name}: " + ", ".join(f"{n} {check.timing.ratio(base, r):.3f}x"
                                                  for n, r in results.items() if isinstance(r, check.timing.Timing)),
              flush=True)
    return results


check.timing.interleaved = interleaved

if __name__ == "__main__":
    sys.exit(check.main())
