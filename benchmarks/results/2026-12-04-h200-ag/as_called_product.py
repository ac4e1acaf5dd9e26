"""Issue 16 (GPU): the op as called on the product's streams (streams.py: the compose route's
side stream at the default priority, the kernels route's at high priority with a recipe)
against the same op on one stream: as_called_streams.py (run 4) with only its ``one stream``
providers (streams.BESIDE off), ratios to 3 decimals. Arguments as
benchmarks/grouped_compose_gpu_check.py's.

    PYTHONPATH=src python3 benchmarks/results/2026-12-04-h200-ag/as_called_product.py --providers "compiled composition,tilefuse,fp8_block" ...
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import as_called_streams as streams_run  # noqa: E402  (patches the check's providers and timing)

check = streams_run.check


def providers_for(i, interleave, activation="swiglu", names=check.PROVIDERS):
    out = streams_run._providers_for(i, interleave, activation, names)
    for name in ("tilefuse", "fp8_block"):
        if name in out:
            out[f"{name} one stream"] = streams_run._with(out[name], False, 0)
    return out


check.providers_for = providers_for

if __name__ == "__main__":
    sys.exit(check.main())
