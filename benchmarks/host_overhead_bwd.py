"""Host time of the DyT backward path, layer by layer, on a tiny CUDA tensor.

    PYTHONPATH=src python benchmarks/host_overhead_bwd.py
"""

import cProfile
import pstats

import torch

import tilefuse
from tilefuse.ops.dyt import launch, op

from host_overhead import per_call_us, tiny_inputs


def main():
    x, a, w, b, dy = tiny_inputs()
    xd, ad, wd, bd = (t.detach() for t in (x, a, w, b))
    cfg = launch.pick_config(launch.problem_for(xd, True, "bwd"))
    rows = {
        "launch.backward(config given)": lambda: launch.backward(dy, xd, ad, wd, bd, True, config=cfg),
        "launch.backward": lambda: launch.backward(dy, xd, ad, wd, bd, True),
        "backward_impl": lambda: op.backward_impl(dy, xd, ad, wd, bd, True),
        "fwd+bwd autograd.grad": lambda: torch.autograd.grad(tilefuse.dyt(x, a, w, b), (x, a, w, b), dy),
        "fwd+bwd y.backward": lambda: tilefuse.dyt(x, a, w, b).backward(dy),
        "eager fwd+bwd autograd.grad": lambda: torch.autograd.grad(w * torch.tanh(a * x) + b, (x, a, w, b), dy),
    }
    for name, fn in rows.items():
        print(f"{name:32s} {per_call_us(fn, 1000):8.1f} us/call", flush=True)
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(300):
        launch.backward(dy, xd, ad, wd, bd, True)
    torch.cuda.synchronize()
    prof.disable()
    pstats.Stats(prof).sort_stats("cumtime").print_stats(25)


if __name__ == "__main__":
    main()
