"""Run 1 probe (issue 17): the dyt bf16 kernels' persistent grids beyond the sweep's space.

The tuned bf16 forward at 1024-8192 columns and the forward + backward at 16 and 512-8192
columns stay at 83-91% of the copy ceiling (results/2026-12-01-h200-k run 5). Hypothesis: the
persistent kernels' grids (programs_per_sm * SMs, programs_per_sm <= 4 in the sweep) leave
too few warps resident to cover the loads' latency (2-warp programs: 8 warps an SM), or ask
for more programs than fit (then a second wave). This probe times, at 2**26 bf16 elements with
fp32 weight and bias, channels-last, under CUDA-graph replay (tuning.timing.interleaved):
- the forward: the table's pick, and the persistent prefetching forward at 2/4/8 warps,
  2048-8192-element tiles, programs_per_sm 2/4/8/16 (registers and the programs that fit an
  SM printed beside each: 64K registers, 64 warps, 32 programs an SM);
- the backward (main kernel + reduction): the table's pick, and the prefetching backward at
  8/16 warps, 4096/8192-element tiles, programs_per_sm 1/2/3/4.
Times are shares of a bf16 copy (y.copy_(x)) of the same size measured in the same process.

    PYTHONPATH=src python3 benchmarks/results/2026-12-02-h200-n/run1_dyt_probe.py [--widths 1024,2048]
    ncu -k regex:dyt_fwd --launch-skip 1 --launch-count 1 python3 .../run1_dyt_probe.py --ncu 1024
"""
import argparse
import itertools

import torch

from tilefuse.check import bench
from tilefuse.ops.dyt import launch
from tilefuse.ops.dyt.configs import DyTConfig
from tilefuse.tuning import timing

parser = argparse.ArgumentParser()
parser.add_argument("--widths", default="16,512,1024,2048,4096,8192")
parser.add_argument("--passes", default="fwd,bwd")
parser.add_argument("--rounds", type=int, default=3)
parser.add_argument("--ncu", type=int, help="only launch the table's forward at this width 3 times (for ncu)")
args = parser.parse_args()
if args.ncu:
    xn = torch.randn(2 ** 26 // args.ncu, args.ncu, device="cuda").to(torch.bfloat16)
    one = torch.ones(args.ncu, device="cuda")
    for _ in range(3):
        launch.forward(xn, torch.tensor([0.7], device="cuda"), one, one, True)
    torch.cuda.synchronize()
    raise SystemExit(0)
numel = 2 ** 26
dev = torch.device("cuda")
sms = torch.cuda.get_device_properties(dev).multi_processor_count
ceiling = bench.copy_ceiling_gbs(numel, torch.bfloat16)
print(f"{torch.cuda.get_device_name()} torch {torch.__version__}; bf16 copy ceiling {ceiling:.0f} GB/s; {sms} SMs")


def fits(regs, warps):
    """Programs of ``warps`` warps at ``regs`` registers a thread that fit one SM."""
    per_warp = ((max(regs, 1) * 32 + 255) // 256) * 256
    return min(65536 // (per_warp * warps), 64 // warps, 32)


def regs_of(launcher):
    kernels = [e[3] for e in launcher._entries.values()]
    return (kernels[0].n_regs, kernels[0].n_spills) if kernels else (0, 0)


for width in [int(w) for w in args.widths.split(",")]:
    rows = numel // width
    g = torch.Generator(device=dev).manual_seed(width)
    x = torch.randn(rows, width, device=dev, generator=g).to(torch.bfloat16)
    dy = torch.randn(rows, width, device=dev, generator=g).to(torch.bfloat16)
    alpha = torch.tensor([0.7], device=dev)
    w = torch.randn(width, device=dev, generator=g)
    b = torch.randn(width, device=dev, generator=g)
    lay = launch._layout(x, True)
    for pass_ in args.passes.split(","):
        table = launch.pick_config(launch.problem_for(x, True, pass_))
        cands = [table]
        if pass_ == "fwd":
            space = itertools.product((2, 4, 8), (2048, 4096, 8192), (2, 4, 8, 16))
        else:
            space = itertools.product((8, 16), (4096, 8192), (1, 2, 3, 4))
        for warps, tile, pps in space:
            bn = min(width, tile)
            c = DyTConfig(max(1, tile // bn), bn, warps, pps, True)
            if tile >= 32 * warps * 8 and c not in cands:
                cands.append(c)
        providers, launchers = {}, {}
        y = torch.empty_like(x)
        dx = torch.empty_like(x)
        dwt, dbs, dal = torch.empty_like(w), torch.empty_like(b), torch.empty_like(alpha)
        for c in cands:
            if pass_ == "fwd":
                fl = launch.ForwardLaunch(lay, 2, True, dev, c)
                fn = (lambda fl=fl: fl.launch(x, y, alpha, w, b))
                launchers[c.name] = fl.launch
            else:
                bl = launch.BackwardLaunch(lay, 2, True, dev, c)
                fn = (lambda bl=bl: bl(dy, x, dx, alpha, w, dwt, dbs, dal))
                launchers[c.name] = bl.main
            fn()
            providers[c.name] = fn
        copy = lambda: y.copy_(x)  # noqa: E731
        providers["copy"] = copy
        res = timing.interleaved(providers, graphs=True, rounds=args.rounds, target_ms=8.0)
        nbytes = (2 if pass_ == "fwd" else 3) * numel * 2
        t_copy = res["copy"].median_ms
        out = []
        for c in cands:
            t = res[c.name]
            if isinstance(t, Exception):
                print(f"  {c.name}: {t!r}")
                continue
            regs, spills = regs_of(launchers[c.name])
            gbs = nbytes / (t.median_ms * 1e-3) / 1e9
            out.append((t.median_ms, c, regs, spills, gbs))
        out.sort(key=lambda r: r[0])
        print(f"\nbf16 {pass_} width {width} ({rows} rows); copy {t_copy * 1e3:.1f} us "
              f"({2 * numel * 2 / (t_copy * 1e-3) / 1e9:.0f} GB/s); table {table.name}")
        print("| config | us | of copy ceiling | regs | spills | fit an SM | grid programs |")
        print("|---|---|---|---|---|---|---|")
        for ms, c, regs, spills, gbs in out[:12] + [r for r in out[12:] if r[1] == table]:
            fit = fits(regs, c.num_warps)
            mark = " (table)" if c == table else ""
            print(f"| {c.name}{mark} | {ms * 1e3:.1f} | {gbs / ceiling:.1%} | {regs} | {spills} | {fit} "
                  f"| {c.programs_per_sm * sms if c.prefetch or pass_ == 'bwd' else '-'} |", flush=True)
    del x, dy, y, dx
