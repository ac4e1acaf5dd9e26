"""Run 4 probe: registers of the dyt backward's channels-last kernel compiled by this
machine's Triton (the device image's 3.6; the CPU suite's 3.8 compiles differently) for
sm_90, in f947b08 (run4_f947b08_kernels.py, that commit's kernels.py, loaded as a module of
the tilefuse.ops.dyt package) and in the tree it runs in, at the tiles of the shipped fp32 and
bf16 configs; and how many programs of each fit on an SM (registers only) against the
programs_per_sm the config's persistent grid plans for. Run 4 ran it in 1ba7ba3 (the pairs).
run4_f947b08_kernels.py is not kept (the tree's own kernels.py is f947b08's again since the
revert); write it first:

    git show f947b08:src/tilefuse/ops/dyt/kernels.py > benchmarks/results/2026-12-01-h200-k/run4_f947b08_kernels.py
    PYTHONPATH=src python3 benchmarks/results/2026-12-01-h200-k/run4_regs_probe.py
"""
import importlib.util
import inspect
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", ".."))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
import tilefuse.ops.dyt  # noqa: F401,E402
from compile_report import compile_kernel, summarize  # noqa: E402
from tilefuse.ops.dyt import kernels as new  # noqa: E402

spec = importlib.util.spec_from_file_location("tilefuse.ops.dyt._f947b08_kernels",
                                              os.path.join(os.path.dirname(__file__), "run4_f947b08_kernels.py"))
old = importlib.util.module_from_spec(spec)
spec.loader.exec_module(old)

CASES = [("fp32", 1, 2048, 4, False, 4), ("fp32", 1, 1024, 4, False, 4), ("fp32", 8, 1024, 16, False, 1),
         ("fp32", 128, 16, 16, False, 2), ("fp32", 512, 1, 4, False, 8),
         ("bf16", 1, 2048, 8, True, 2), ("bf16", 4, 2048, 16, True, 1), ("bf16", 256, 16, 16, True, 1),
         ("bf16", 64, 128, 16, True, 1)]
for dt, bm, bn, warps, pf, pps in CASES:
    P = "*" + dt
    for name, mod in (("f947b08", old), ("this tree", new)):
        sig = {"dy_ptr": P, "x_ptr": P, "dx_ptr": P, "alpha_ptr": "*fp32", "weight_ptr": "*fp32",
               "dweight_part_ptr": "*fp32", "dbias_part_ptr": "*fp32", "dalpha_part_ptr": "*fp32", "n_rows": "i32",
               "n_cols": "i32", "n_groups": "i32", "HAS_BIAS": "constexpr", "BLOCK_M": "constexpr",
               "BLOCK_N": "constexpr", "PREFETCH": "constexpr"}
        ce = {"HAS_BIAS": True, "BLOCK_M": bm, "BLOCK_N": bn, "PREFETCH": pf}
        variants = [None]
        if "PAIRS" in inspect.signature(mod.dyt_bwd_cols_kernel.fn).parameters:
            sig["PAIRS"] = "constexpr"
            variants = [False, True] if dt == "bf16" else [False]
        for pairs in variants:
            c2 = dict(ce) if pairs is None else dict(ce, PAIRS=pairs)
            c = compile_kernel(mod.dyt_bwd_cols_kernel, sig, c2, ["dy_ptr", "x_ptr", "dx_ptr", "weight_ptr",
                               "dweight_part_ptr", "dbias_part_ptr", "n_cols"], 90, warps)
            usage = summarize(c)
            regs = int(usage.split()[1])
            fit = 65536 // (((regs + 7) // 8 * 8) * 32 * warps)
            print(f"{dt} M{bm}-N{bn}-w{warps}{'-pf' if pf else ''} p{pps} {name:9s} pairs={pairs}: regs {regs}, "
                  f"{fit} programs fit per SM (grid plans {pps}){'  <-- fewer' if fit < pps else ''} | {usage}",
                  flush=True)
