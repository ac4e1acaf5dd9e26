"""Diagnose fused-vs-relay bitwise differences of the so2 backward on a GPU: for a few shapes,
edge counts and fused configs, how many elements of grad_u0 / grad_alpha differ.

    PYTHONPATH=src:tests python3 benchmarks/results/2026-11-29-h200-b/so2_bitwise_diag.py

(A one-off of runs 2 and 3, moved here from benchmarks/; it imports tests/test_so2_kernels.py.)
"""
import tilefuse
from tilefuse import tuning
from tilefuse.ops.so2_mixing_stack.configs import So2Config
from test_so2_kernels import _force_grads, _register_fused, make

for lmax, nf, cf in [(2, 1, 16), (2, 1, 32), (3, 2, 32)]:
    for E in (1, 2, 5, 16, 17, 37):
        _, inputs = make(lmax, nf, cf, E, "cuda")
        tuning.reload()
        with tilefuse.level(2):
            relay = _force_grads(inputs, lmax, cf, False)
        line = []
        for cfg in [So2Config(16, 128, cf, 8, 1, True), So2Config(32, 64, cf, 4, 1, True),
                    So2Config(16, 64, cf, 4, 1, True), So2Config(64, 64, cf, 8, 1, True)]:
            _register_fused(lmax, cf, cfg)
            with tilefuse.level(2):
                fused = _force_grads(inputs, lmax, cf, False)
            tuning.unregister("so2_mixing_stack")
            n = [int((r != f).sum()) for r, f in zip(relay, fused)]
            line.append(f"M{cfg.block_m}N{cfg.block_n}w{cfg.num_warps}:{n[0]}/{relay[0].numel()},{n[1]}")
        print(f"L{lmax} F{nf} C{cf} E{E}: " + "  ".join(line), flush=True)
