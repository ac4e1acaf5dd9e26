"""Where a DyT forward call's host time goes, piece by piece (issue 17: 24.0 us a forward call
against F.layer_norm's 13.7 in 2026-12-02-h200-o run 2, whose layer table put ~13 us in
launch.forward). On a 64 x 16 fp32 tensor (GPU time negligible), each piece alone, host
microseconds per call (check.dyt.median_per_call_us: 3 rounds of 3000 synchronised calls):

- the plan lookup, the output allocation, the CompiledLauncher call (ForwardLaunch.launch);
- what that call does, cut down: ``_launch_compiled`` with precomputed pointers and stream;
  the driver's CudaLauncher.__call__ (``entry.run``); its C launcher alone (``run.launch``,
  the generated extension: argument parsing, cuLaunchKernelEx);
- ATen references: ``torch.neg(x, out=y)`` (one native launch, no allocation), ``torch.neg(x)``,
  ``torch.tanh(x)``, ``F.layer_norm`` without grad.

    PYTHONPATH=src python3 benchmarks/results/2026-12-02-h200-s/run5_launch_pieces.py
"""
import torch
import torch.nn.functional as F

import tilefuse
from tilefuse.check.dyt import median_per_call_us
from tilefuse.device import current_cuda_device, current_cuda_stream
from tilefuse.ops import triton_common
from tilefuse.ops.dyt import plan as plans

x = torch.randn(64, 16, device="cuda")
a = torch.full((1,), 0.5, device="cuda")
w = torch.ones(16, device="cuda")
b = torch.zeros(16, device="cuda")
y = torch.empty_like(x)
tilefuse.dyt(x, a, w, b)
p = plans.lookup(x, a, w, b, True)
p.launch_forward(x, a, w, b)
fl = p._fwd.launch
entry = next(iter(fl._entries.values()))
run, function, packed, kernel = entry
tensors = (x, y, a, w, b)
ptrs = [t.data_ptr() for t in tensors]
stream = current_cuda_stream(current_cuda_device())
g = fl.grid3
args = (*ptrs, *fl.tail)
c_launch = getattr(run, "launch", None)
coop, pdl = getattr(run, "launch_cooperative_grid", 0), getattr(run, "launch_pdl", 0)
print(f"torch {torch.__version__}, triton {triton_common.triton.__version__}, {torch.cuda.get_device_name()}")
print(f"kernel {kernel.name}, grid {fl.grid}, tail {fl.tail}, launcher {type(run).__name__}, "
      f"scratch {getattr(run, 'global_scratch_size', '?')}/{getattr(run, 'profile_scratch_size', '?')}")

pieces = {
    "tilefuse.dyt, no grad": lambda: tilefuse.dyt(x, a, w, b),
    "plan lookup": lambda: plans.lookup(x, a, w, b, True),
    "output allocation (empty_like)": lambda: torch.empty_like(x),
    "Plan.launch_forward (lookup excluded)": lambda: p.launch_forward(x, a, w, b),
    "CompiledLauncher call": lambda: fl(x, y, a, w, b),
    "_launch_compiled, pointers and stream given": lambda: triton_common._launch_compiled(
        entry, fl.grid, g, stream, ptrs, tensors, fl.tail),
    "CudaLauncher.__call__ (entry.run)": lambda: run(g[0], g[1], g[2], stream, function, packed, None, None, None,
                                                       *args),
    "data_ptr x5 + device + stream": lambda: ([t.data_ptr() for t in tensors],
                                              current_cuda_stream(current_cuda_device())),
    "torch.neg(x, out=y)": lambda: torch.neg(x, out=y),
    "torch.neg(x)": lambda: torch.neg(x),
    "torch.tanh(x)": lambda: torch.tanh(x),
    "F.layer_norm(x), no grad": lambda: F.layer_norm(x, (16,), w, b),
}
if c_launch is not None:
    pieces["C launcher alone (run.launch)"] = lambda: c_launch(g[0], g[1], g[2], stream, function, coop, pdl,
                                                                None, None, packed, None, None, None, *args)
for name, fn in pieces.items():
    print(f"{name:48s} {median_per_call_us(fn, calls=3000, rounds=3):7.2f} us/call", flush=True)
