"""Diagnose fused-vs-relay bitwise differences of the so2 backward on a GPU.

    PYTHONPATH=src:tests python3 benchmarks/so2_bitwise_diag.py
"""

import tilefuse
from tilefuse import tuning
from tilefuse.ops.so2_mixing_stack import tune as so2_tune
from tilefuse.ops.so2_mixing_stack.configs import So2Config
from test_so2_kernels import _force_grads, make

for lmax, nf, cf, E, alpha in [(2, 1, 16, 1, False), (2, 1, 16, 1, True), (2, 1, 16, 37, False),
                               (2, 1, 32, 1, False), (3, 2, 32, 1, True)]:
    _, inputs = make(lmax, nf, cf, E, "cuda")
    tuning.reload()
    with tilefuse.level(2):
        relay = _force_grads(inputs, lmax, cf, alpha)
    for cfg in [So2Config(16, 128, cf, 8, 1, True), So2Config(32, 64, cf, 4, 2, True),
                So2Config(16, 64, cf, 4, 1, True), So2Config(32, 128, cf, 8, 2, True)]:
        tuning.register("so2_mixing_stack", {so2_tune.So2Problem(lmax, cf, 4): cfg})
        with tilefuse.level(2):
            fused = _force_grads(inputs, lmax, cf, alpha)
        diffs = []
        for name, r, f in zip(("du0", "dalpha"), relay, fused):
            bad = (r != f)
            if bad.any():
                idx = bad.nonzero()[:3].tolist()
                diffs.append(f"{name}: {int(bad.sum())}/{r.numel()} differ, max {float((r - f).abs().max()):.3g} at {idx}")
        print(f"L{lmax} F{nf} C{cf} E{E} alpha={alpha} {cfg.name}: " + ("; ".join(diffs) or "bitwise equal"))
        tuning.unregister("so2_mixing_stack")
