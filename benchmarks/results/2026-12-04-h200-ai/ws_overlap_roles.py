"""Issue 16 (GPU): fp8_block's warp-specialised store GEMM (ops/grouped_glu_mlp/ws_kernels.py)
with each consumer's K chunks one at a time (the shipped schedule: wgmma, wait, rescale) and two
at a time (``overlap``: both chunks' wgmma issued, the first rescaled while the tensor cores run
the second). Per spec shape and role (fc2: K = F, N = H; the fc1 dgrad: K = 2F, N = H), at the
table's ring depth (3) and at 5, the two schedules' outputs compared bit for bit (and with
grouped_gemm_kernel's), then timed: ``tilefuse.tuning.timing.interleaved``, CUDA-graph replay,
rounds rotating over the variants; medians, TFLOP/s, and overlap / shipped per round.
Ragged counts as the tuner draws them (multinomial over the experts, one of them empty).

    PYTHONPATH=src python3 benchmarks/results/2026-12-04-h200-ai/ws_overlap_roles.py [--rounds 7]

Ran at tree dedbeaf (run 1). ws_kernels.launch's ``overlap`` is gone since 2e8bf58 (chunk pairs are
the only schedule), so this program runs at that tree only; run 2's ws_glu_roles.py times
the shipped kernel.
"""
import argparse

import torch

from tilefuse.ops.grouped_glu_mlp import launch, recipes, ws_kernels
from tilefuse.ops.grouped_glu_mlp.configs import heuristic
from tilefuse.ops.grouped_glu_mlp.kernels import EPI_STORE
from tilefuse.ops.grouped_glu_mlp.tune import DEFAULT_SHAPES
from tilefuse.tuning import timing


def routed_counts(E, T, device, gen):
    """The tuner's ragged split (tune.py's make_inputs): multinomial counts, expert E // 2 empty."""
    weights = torch.rand(E, generator=gen, device=device)
    weights[E // 2] = 0
    counts = torch.bincount(torch.multinomial(weights, T, replacement=True, generator=gen), minlength=E)
    return counts.to(torch.int32)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--stages", default="3,5")
    args = p.parse_args()
    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(0)
    print(f"{torch.cuda.get_device_name()} torch {torch.__version__}", flush=True)
    for si, (E, T, H, F) in enumerate(DEFAULT_SHAPES, 1):
        counts = routed_counts(E, T, dev, g)
        for role, K in (("fc2", F), ("fc1 dgrad", 2 * F)):
            N = H
            a = torch.randn(T, K, generator=g, device=dev).bfloat16()
            w = (torch.randn(E, N, K, generator=g, device=dev) * K ** -0.5).bfloat16()
            qa, qw = recipes.quantize_rows("fp8_block", a), recipes.quantize_weight("fp8_block", w)
            ref = torch.full((T, N), float("nan"), dtype=torch.bfloat16, device=dev)
            launch._gemm(EPI_STORE, qa, qw, ref, counts, heuristic("fwd", 2, "fp8_block"), K=K, N=N,
                         b_strides=(0, 0, 0), ldc=N, recipe="fp8_block")
            providers = {}
            for stages in map(int, args.stages.split(",")):
                for overlap in (False, True):
                    c = torch.full((T, N), float("nan"), dtype=torch.bfloat16, device=dev)
                    assert ws_kernels.launch(qa, qw, c, counts, N=N, stages=stages, overlap=overlap)
                    same = torch.equal(c.view(torch.int16), ref.view(torch.int16))
                    print(f"shape {si} {role} s{stages} overlap={overlap}: bitwise grouped_gemm_kernel: {same}",
                          flush=True)
                    providers[f"s{stages}{' overlap' if overlap else ''}"] = (
                        lambda c=c, s=stages, o=overlap: ws_kernels.launch(qa, qw, c, counts, N=N, stages=s,
                                                                           overlap=o))
            res = timing.interleaved(providers, rounds=args.rounds, graphs=True)
            flops = 2 * T * N * K
            for name, r in res.items():
                base = res[name.replace(" overlap", "")]
                print(f"  shape {si} ({E}, {T}, {H}, {F}) {role:9s} {name:11s} {r.median_ms:7.3f} ms "
                      f"[{r.min_ms:.3f}-{r.max_ms:.3f}] {flops / r.median_ms / 1e9:6.0f} TFLOP/s"
                      + (f"  overlap / shipped {timing.ratio(base, r):.3f}x" if "overlap" in name else ""),
                      flush=True)


if __name__ == "__main__":
    main()
