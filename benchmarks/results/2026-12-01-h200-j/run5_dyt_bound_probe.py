"""Run 5 probe: tests/test_dyt.py::test_channels_last_matches_reference[37x48-bf16-fp32params-nobias]
failed once in run 3's GPU suite (fresh random inputs each call; the process hit its time limit
before printing why) and passed in runs 2 and 4. This repeats that case and its neighbours with
many fresh seeds and prints every failing comparison (output, worst error over its bound, where).

    PYTHONPATH=src:tests python3 benchmarks/results/2026-12-01-h200-j/run5_dyt_bound_probe.py [SECONDS]
"""
import sys
import time

import torch

from dyt_helpers import make_inputs, run
from tilefuse.ops.dyt.verify import compare_to_reference

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
budget = float(sys.argv[1]) if len(sys.argv) > 1 else 40.0
cases = [((37, 48), dt, pdt, bias) for dt in (torch.bfloat16, torch.float16)
         for pdt in (torch.float32, dt) for bias in (False, True)]
t0, n, failures, worst = time.time(), 0, {}, {}
while time.time() - t0 < budget:
    for shape, dt, pdt, bias in cases:
        seed = 1000 + n
        inputs = make_inputs(shape, dt, pdt, bias, True, DEVICE, seed=seed)
        outs = run(*inputs, channels_last=True)
        for c in compare_to_reference(*inputs, True, outs):
            key = (str(dt), str(pdt), bias, c.name)
            if c.worst_over_bound > worst.get(key, (0.0,))[0]:
                worst[key] = (c.worst_over_bound, seed)
            if not c.ok:
                key = (str(dt), str(pdt), bias, c.name)
                failures.setdefault(key, []).append((seed, c.worst_over_bound, c.first_failure))
        n += 1
print(f"{n} calls over {len(cases)} cases in {time.time() - t0:.0f} s")
for key, fs in sorted(failures.items()):
    worst = max(fs, key=lambda f: f[1])
    print(f"FAIL {key}: {len(fs)} of ~{n // len(cases)} seeds; worst {worst[1]:.3f}x its bound at seed {worst[0]}: "
          f"{worst[2]}")
if not failures:
    print("no comparison failed")
print("largest error over its bound, per case and output (seed):")
for key, (ratio, seed) in sorted(worst.items()):
    print(f"  {key}: {ratio:.3f} ({seed})")
