"""Issue 16 (GPU): fp8_block's row-wise and column-wise copies of an activation from one
quantizer launch (recipes.quantize_rows_cols, quant.launch.fp8_block_rows_cols: one read of the
tensor) against the two launches it replaced (quantize_rows, quantize_cols), at the spec's
three shapes' x / dy (T, H) and h (T, F); then fp8_block forward + backward as called with the
paired launches and with the separate ones (recipes.PAIR_ROWS_COLS), beside bf16 tilefuse,
interleaved graph replays (grouped_compose_gpu_check's providers and timing); and eagerly, the
step with the weights quantized every call against the step inside
tilefuse.reuse_quantized_weights (a gradient-accumulation step's later micro-batches). Bits of
the paired copies against the separate ones checked at every size.

    PYTHONPATH=src python3 benchmarks/results/2026-12-05-h200-ak/quant_pair.py [--shapes 1,2,3]
"""
import argparse
import statistics
import sys
from pathlib import Path

import torch
import triton
import triton.testing

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))   # benchmarks/
import grouped_compose_gpu_check as check  # noqa: E402

import tilefuse  # noqa: E402

from tilefuse.ops.grouped_glu_mlp import recipes  # noqa: E402
from tilefuse.ops.grouped_glu_mlp.reference import random_inputs  # noqa: E402
from tilefuse.ops.grouped_glu_mlp.tune import DEFAULT_SHAPES  # noqa: E402


def bench(fn, rep=50):
    return triton.testing.do_bench(fn, warmup=10, rep=rep, return_mode="median")


def same(a, b):
    return all(torch.equal(x.data, y.data) and torch.equal(x.scales.view(torch.int32), y.scales.view(torch.int32))
               for x, y in zip(a, b))


def copies(E, T, N):
    """The pair of a (T, N) tensor of E experts' balanced tokens (the column-wise copy grouped
    by expert since this script was written; quantize_cols takes the counts)."""
    t = torch.randn(T, N, device="cuda").bfloat16()
    c = torch.full((E,), T // E, dtype=torch.int32, device="cuda")
    paired = lambda: recipes.quantize_rows_cols("fp8_block", t, c)              # noqa: E731
    separate = lambda: (recipes.quantize_rows("fp8_block", t), recipes.quantize_cols("fp8_block", t, c))  # noqa: E731
    ok = same(paired(), separate())
    times = {"paired": [], "separate": []}
    for _ in range(3):
        times["paired"].append(bench(paired))
        times["separate"].append(bench(separate))
    p, s = statistics.median(times["paired"]), statistics.median(times["separate"])
    # bytes: the paired launch reads t once, the separate ones twice; both write the two copies
    write = 2 * T * N + 4 * (T * N // 128) * 2
    return ok, p, s, (2 * T * N + write) / p / 1e6, (4 * T * N + write) / s / 1e6


def separate(step):
    """``step`` with x's, h's and dy's copies from separate launches while it runs (and is
    captured)."""
    def run():
        recipes.PAIR_ROWS_COLS = False
        try:
            return step()
        finally:
            recipes.PAIR_ROWS_COLS = True
    return run


def whole_op(E, T, H, F):
    """bf16 tilefuse, fp8_block (paired) and fp8_block with separate launches as called, through
    grouped_compose_gpu_check's providers and interleaved graph-replay timing."""
    i = random_inputs([T // E] * E, H, F, torch.bfloat16, bias=False, device="cuda",
                      generator=torch.Generator().manual_seed(1))
    steps = check.providers_for(i, 32, names=("tilefuse", "fp8_block"))
    steps["fp8_block separate"] = separate(steps["fp8_block"])
    check.time_providers(steps, 5, check.step_flop(T, H, F), {})


def reuse_op(E, T, H, F):
    """fp8_block forward + backward as called, eagerly (tilefuse.reuse_quantized_weights does
    not engage under graph capture): the weights quantized every call, and inside a reuse
    block (a gradient-accumulation step's second micro-batch onward: do_bench's warm-up calls
    make the block's copies), beside bf16 tilefuse; 3 interleaved rounds."""
    i = random_inputs([T // E] * E, H, F, torch.bfloat16, bias=False, device="cuda",
                      generator=torch.Generator().manual_seed(2))
    steps = check.providers_for(i, 32, names=("tilefuse", "fp8_block"))
    times = {"bf16 tilefuse": [], "fp8_block": [], "fp8_block reused": []}
    for _ in range(3):
        times["bf16 tilefuse"].append(bench(steps["tilefuse"]))
        times["fp8_block"].append(bench(steps["fp8_block"]))
        with tilefuse.reuse_quantized_weights():
            times["fp8_block reused"].append(bench(steps["fp8_block"]))
    r = {k: statistics.median(v) for k, v in times.items()}
    print("  eager: " + " ".join(f"{k}={v:.3f} ms" for k, v in r.items())
          + f" plain/reused={r['fp8_block'] / r['fp8_block reused']:.3f}x"
          + f" fp8(reused)/bf16={r['bf16 tilefuse'] / r['fp8_block reused']:.3f}x", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="1,2,3")
    args = ap.parse_args()
    print(torch.cuda.get_device_name(), torch.__version__, triton.__version__)
    for s in map(int, args.shapes.split(",")):
        E, T, H, F = DEFAULT_SHAPES[s - 1]
        for name, N in (("x/dy", H), ("h", F)):
            ok, p, sep, bw_p, bw_s = copies(E, T, N)
            print(f"shape {s} {name} ({T}x{N}) bitwise={ok} paired={p * 1e3:.1f}us ({bw_p:.0f} GB/s) "
                  f"separate={sep * 1e3:.1f}us ({bw_s:.0f} GB/s) separate/paired={sep / p:.3f}x", flush=True)
        print(f"shape {s} op fwd+bwd, graph replay, interleaved:", flush=True)
        whole_op(E, T, H, F)
        reuse_op(E, T, H, F)


if __name__ == "__main__":
    main()
