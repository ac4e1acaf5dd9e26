"""Issue 16 (GPU): a step's replay time over seconds of back-to-back replays, beside the SM
clock and power draw (nvidia-smi sampled every 100 ms), for bf16 tilefuse and fp8_block.

-aj run 4 timed single CUDA-graph replays after idle moments at 5.80 / 5.82 ms (shape 1, bf16 /
fp8_block), while the interleaved harness of run 1 (back-to-back replays, every provider in
turn, for minutes) read 6.33 / 6.62 ms. This program replays one provider's step back to back for
``--seconds`` and prints the median replay time per half-second window with the mean SM clock,
power and throttle reasons nvidia-smi reported in that window.

    PYTHONPATH=src python3 benchmarks/results/2026-12-04-h200-aj/sustained.py [--shapes 1,3] [--seconds 4]
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
            for name in names:
                step = providers[name]
                step()
                graph, _ = capture_cuda_graph(step)
                graph.replay()
                torch.cuda.synchronize()
                time.sleep(1.0)   # idle first, as before a single replay
                start = time.time()
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
                    windows.append((f"shape {index} {name}", t0, time.time(), statistics.median(samples)))
                del graph
                torch.cuda.synchronize()
            del providers, i
            torch.cuda.empty_cache()
    finally:
        time.sleep(0.3)
        smi.terminate()
        smi.wait()
    rows = smi_rows(args.log)
    print(torch.__version__, torch.cuda.get_device_name(), f"{len(rows)} nvidia-smi samples")
    label = None
    for name, t0, t1, ms in windows:
        if name != label:
            print(f"\n{name}: window start (s), ms a replay, SM MHz, W, throttle reasons")
            label, first = name, t0
        inside = [r for r in rows if t0 <= r[0] <= t1]
        clock = statistics.mean(r[1] for r in inside) if inside else float("nan")
        power = statistics.mean(r[2] for r in inside) if inside else float("nan")
        reasons = sorted({r[3] for r in inside})
        print(f"  {t0 - first:5.1f}  {ms:7.3f}  {clock:6.0f}  {power:5.0f}  {' '.join(reasons)}")


if __name__ == "__main__":
    main()
