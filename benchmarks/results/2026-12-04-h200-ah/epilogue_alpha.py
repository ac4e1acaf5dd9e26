"""so2_mixing_stack level 3 (GPU): does loading alpha a chunk in the wgmma kernel's BWD_HEAD
epilogue (this tree) instead of once before the chunk loop (wgmma_kernels_cc5cfb1.py, the
kernel as of cc5cfb1) change the bits or the time? The change removes a 24-byte stack that
CUDA 13.0's ptxas gave the 64x128 tile at Cf 32 (torch's ptxas, which inductor puts in
TRITON_PTXAS_PATH); under Triton's bundled ptxas neither version has a stack.

At the issue's three shapes at level 3 (the built-in table's validated 3xfp16 wgmma entries),
forward + force backward (gradients of u0 and alpha), graph replay, interleaved rounds: the
two kernels' outputs compared bitwise, then timed. Run once with Triton's ptxas and once with
TRITON_PTXAS_PATH naming torch's (run1.sh).

    PYTHONPATH=src python3 benchmarks/results/2026-12-04-h200-ah/epilogue_alpha.py
"""
import importlib.util
import os
import sys
from pathlib import Path

import torch

import tilefuse
from tilefuse.ops.so2_mixing_stack import wgmma_kernels
from tilefuse.tuning import timing

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
from so2_peers import make_inputs  # noqa: E402


def old_kernel():
    """cc5cfb1's so2_gemm3x_wgmma_kernel, loaded as a module of the same package (its relative
    imports resolve there)."""
    name = "tilefuse.ops.so2_mixing_stack._wgmma_cc5cfb1"
    spec = importlib.util.spec_from_file_location(name, HERE / "wgmma_kernels_cc5cfb1.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module.so2_gemm3x_wgmma_kernel


def main():
    print(torch.__version__, torch.cuda.get_device_name(), "TRITON_PTXAS_PATH",
          os.environ.get("TRITON_PTXAS_PATH", "unset (Triton's bundled ptxas)"), flush=True)
    kernels = {"this tree": wgmma_kernels.so2_gemm3x_wgmma_kernel, "cc5cfb1": old_kernel()}
    tilefuse.set_level(3)
    print("| shape (E, lmax, Cf) | bitwise | this tree ms | cc5cfb1 ms | cc5cfb1 / this tree |")
    print("|---|---|---|---|---|")
    for n_edges, lmax, cf in ((647_000, 3, 32), (300_000, 6, 32), (400_000, 2, 64)):
        inp = make_inputs(n_edges, lmax, cf, "cuda", seed=lmax)

        def step(kernel):
            def run():
                wgmma_kernels.so2_gemm3x_wgmma_kernel = kernel
                x = tilefuse.so2_mixing_stack(*inp.args(), lmax=lmax, focus_dim=cf)
                return (x, *torch.autograd.grad(x, (inp.u0, inp.alpha), inp.grad_out))
            return run
        outs = {n: step(k)() for n, k in kernels.items()}
        same = all(torch.equal(a, b) for a, b in zip(*outs.values()))
        del outs
        t = timing.interleaved({n: step(k) for n, k in kernels.items()}, rounds=9, graphs=True)
        new, old = t["this tree"], t["cc5cfb1"]
        if isinstance(new, Exception) or isinstance(old, Exception):
            print(f"| {n_edges}, {lmax}, {cf} | {same} | {new} | {old} | - |", flush=True)
            continue
        print(f"| {n_edges}, {lmax}, {cf} | {same} | {new.median_ms:.3f} | {old.median_ms:.3f} "
              f"| {timing.ratio(old, new):.4f} |", flush=True)
        wgmma_kernels.so2_gemm3x_wgmma_kernel = kernels["this tree"]
        del inp
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
