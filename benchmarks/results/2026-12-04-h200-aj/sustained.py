"""Issue 16 (GPU): a step's replay time over seconds of back-to-back replays, beside the SM
clock and power draw (nvidia-smi sampled every 100 ms), for bf16 tilefuse and fp8_block.

-aj run 4 timed single CUDA-graph replays after idle moments at 5.80 / 5.82 ms (shape 1, bf16 /
fp8_block), while the interleaved harness of run 1 (back-to-back replays, every provider in
turn, for minutes) read 6.33 / 6.62 ms. This program replays one provider's step back to back for
``--seconds`` and prints the median replay time per half-second window with the mean SM clock,
power and throttle reasons nvidia-smi reported in that window.

    PYTHONPATH=src python3 benchmarks/results/2026-12-04-h200-aj/sustained.py [--shapes 1,3] [--seconds 4] [--rounds 1]

Run 5 ran its first form (tree 0e441c2: one block each, providers in turn, 1 s idle before each); run 6 with
--rounds 3 alternating blocks.
"""
import argparse
import statistics
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))   # benchmarks/
import grouped_compose_gpu_check as check  # noqa: E402

from tilefuse.ops.grouped_glu_mlp.reference import random_inputs  # noqa: E402
from tilefuse.utils import capture_cuda_graph  # noqa: E402

QUERY = "timestamp,clocks.sm,power.draw,clocks_throttle_reasons.active"


def smi_rows(path):
    rows = []
    for line in Path(path).read_text().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 4 or not parts[1].split()[0].isdigit():
            continue
        t = datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
        rows.append((t, float(parts[1].split()[0]), float(parts[2].split()[0]), parts[3]))
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="1,3")
    ap.add_argument("--providers", default="tilefuse,fp8_block")
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--log", default="/tmp/smi.csv")
    ap.add_argument("--rounds", type=int, default=1,
                    help="blocks per provider, alternating (the order rotated each round); the summary's "
                         "per-block medians leave out each block's first window")
    args = ap.parse_args()
    names = args.providers.split(",")
    smi = subprocess.Popen(["nvidia-smi", f"--query-gpu={QUERY}", "--format=csv,noheader", "-lms", "100"],
                           stdout=open(args.log, "w"), stderr=subprocess.DEVNULL)
    windows = []   # (label, t0, t1, ms per replay)
    try:
        for index in (int(s) for s in args.shapes.split(",")):
            E, T, H, F = check.SHAPES[index]
            i = random_inputs([T // E] * E, H, F, torch.bfloat16, bias=False, device="cuda",
                              generator=torch.Generator().manual_seed(0))
            providers = check.providers_for(i, 32, names=names)
            graphs = {}
            for name in names:
                providers[name]()
                graphs[name], _ = capture_cuda_graph(providers[name])
                graphs[name].replay()
            torch.cuda.synchronize()
            time.sleep(1.0)   # idle first, as before a single replay
            for r in range(args.rounds):
                for name in names[r % len(names):] + names[:r % len(names)]:
                    graph, start = graphs[name], time.time()
                    while time.time() - start < args.seconds:
                        t0, samples = time.time(), []
                        while time.time() - t0 < 0.5:
                            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                            a.record()
                            for _ in range(4):
                                graph.replay()
                            b.record()
                            b.synchronize()
                            samples.append(a.elapsed_time(b) / 4)
                        windows.append((f"shape {index} {name}", r, start, t0, time.time(),
                                        statistics.median(samples)))
            del graphs, providers, i
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
    finally:
        time.sleep(0.3)
        smi.terminate()
        smi.wait()
    rows = smi_rows(args.log)
    print(torch.__version__, torch.cuda.get_device_name(), f"{len(rows)} nvidia-smi samples")
    label, blocks = None, {}
    for name, r, start, t0, t1, ms in windows:
        if (name, r) != label:
            print(f"\n{name}, round {r + 1}: window start (s), ms a replay, SM MHz, W, throttle reasons")
            label = (name, r)
        inside = [row for row in rows if t0 <= row[0] <= t1]
        clock = statistics.mean(row[1] for row in inside) if inside else float("nan")
        power = statistics.mean(row[2] for row in inside) if inside else float("nan")
        reasons = sorted({row[3] for row in inside})
        print(f"  {t0 - start:5.1f}  {ms:7.3f}  {clock:6.0f}  {power:5.0f}  {' '.join(reasons)}")
        if t0 > start:   # the block's first window left out of the summary
            blocks.setdefault((name, r), []).append((ms, clock))
    print("\nsummary: per block, the median of its windows after the first (ms a replay, SM MHz)")
    for (name, r), vals in blocks.items():
        print(f"  {name:28s} round {r + 1}: {statistics.median(v[0] for v in vals):7.3f} ms "
              f"{statistics.median(v[1] for v in vals):6.0f} MHz")
    shapes = sorted({name.rsplit(" ", 1)[0] for name, _ in blocks})
    for shape in shapes:
        per = {n: [statistics.median(v[0] for v in blocks[(f"{shape} {n}", r)]) for r in range(args.rounds)
                   if (f"{shape} {n}", r) in blocks] for n in names}
        if all(per[n] for n in names) and len(names) == 2:
            a, b = names
            ratios = [x / y for x, y in zip(per[a], per[b])]
            print(f"  {shape}: {a} time / {b} time per round: " + ", ".join(f"{q:.3f}x" for q in ratios)
                  + f"; median of rounds {statistics.median(per[a]):.3f} / {statistics.median(per[b]):.3f} ms")


if __name__ == "__main__":
    main()
