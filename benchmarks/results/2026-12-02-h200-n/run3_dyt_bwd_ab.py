"""Run 3 A/B (issue 17): the dyt backward with dalpha's accumulator cut to a column per 16 bytes
of a row (this tree's kernels.py) against the kernels before it (``git show
96e59d3:src/tilefuse/ops/dyt/kernels.py``, passed as a file), in one process, interleaved under
CUDA-graph replay (tuning.timing.interleaved). 2**26 elements, fp32 weight and bias,
channels-last, the table's backward config at each width. Checks: dx, dweight and dbias bitwise
equal (their arithmetic did not change), dalpha within a few float32 roundings (its summation
order did).

    PYTHONPATH=src python3 benchmarks/results/2026-12-02-h200-n/run3_dyt_bwd_ab.py run3_dyt_kernels_before.py
"""
import importlib.util
import sys

import torch

from tilefuse.check import bench
from tilefuse.ops.dyt import kernels as new_kernels
from tilefuse.ops.dyt import launch
from tilefuse.tuning import timing

spec = importlib.util.spec_from_file_location("tilefuse.ops.dyt._kernels_before", sys.argv[1])
old_kernels = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = old_kernels
spec.loader.exec_module(old_kernels)
numel, dev = 2 ** 26, torch.device("cuda")
print(f"{torch.cuda.get_device_name()} torch {torch.__version__}")
print("| dtype | width | config | before us | after us | after/before speed | before of copy | after of copy "
      "| dx, dw, db bitwise | dalpha rel diff |")
print("|---|---|---|---|---|---|---|---|---|---|")
for dname, dtype in (("bf16", torch.bfloat16), ("fp32", torch.float32)):
    ceiling = bench.copy_ceiling_gbs(numel, dtype)
    for width in (16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192):
        g = torch.Generator(device=dev).manual_seed(width)
        x = torch.randn(numel // width, width, device=dev, generator=g).to(dtype)
        dy = torch.randn(numel // width, width, device=dev, generator=g).to(dtype)
        alpha = torch.tensor([0.7], device=dev)
        w, b = torch.randn(width, device=dev, generator=g), torch.randn(width, device=dev, generator=g)
        lay = launch._layout(x, True)
        cfg = launch.pick_config(launch.problem_for(x, True, "bwd"))
        outs, fns = {}, {}
        for name, mod in (("before", old_kernels), ("after", new_kernels)):
            saved = new_kernels.dyt_bwd_cols_kernel
            new_kernels.dyt_bwd_cols_kernel = mod.dyt_bwd_cols_kernel   # what BackwardLaunch imports
            try:
                bl = launch.BackwardLaunch(lay, x.element_size(), True, dev, cfg)
            finally:
                new_kernels.dyt_bwd_cols_kernel = saved
            o = (torch.full_like(x, float("nan")), torch.empty_like(w), torch.empty_like(b), torch.empty_like(alpha))
            fns[name] = (lambda bl=bl, o=o: bl(dy, x, o[0], alpha, w, o[1], o[2], o[3]))
            fns[name]()
            outs[name] = o
        torch.cuda.synchronize()
        same = all(torch.equal(p, q) for p, q in zip(outs["before"][:3], outs["after"][:3]))
        da0, da1 = outs["before"][3].double(), outs["after"][3].double()
        rel = float((da0 - da1).abs().max() / da0.abs().max().clamp_min(1e-30))
        res = timing.interleaved(fns, graphs=True, rounds=5, target_ms=10.0)
        t0, t1 = res["before"].median_ms, res["after"].median_ms
        share = lambda t: 3 * numel * x.element_size() / (t * 1e-3) / 1e9 / ceiling   # noqa: E731
        print(f"| {dname} | {width} | {cfg.name} | {t0 * 1e3:.1f} | {t1 * 1e3:.1f} | {t0 / t1:.3f}x | {share(t0):.1%} "
              f"| {share(t1):.1%} | {same} | {rel:.1e} |", flush=True)
        del x, dy, outs, fns
