"""Run 3: where grouped_glu_mlp's host time per forward call goes (run 2: 1.6-2.4x the plain
composition's). Host p50 per call (check.grouped._host_p50_us: synchronise before each call,
time the call only, 300 calls; the median of three p50s) of the op as called and of each layer
beneath it, then cProfile tables of 300 calls (tottime): tilefuse's forward, its forward +
backward, the plain composition's forward. bf16, SwiGLU, no bias,
balanced counts, interleave 32, at the spec's shape 3 and at a small shape (8, 2048, 512, 256)
with shape 3's table entry registered for it (the same path, negligible GPU time).

    PYTHONPATH=src python3 benchmarks/results/2026-12-03-h200-ac/run3_hostprof.py
"""
import cProfile
import io
import pstats
import statistics

import torch

import tilefuse
from tilefuse import tuning
from tilefuse.check.grouped import _host_p50_us
from tilefuse.ops.grouped_glu_mlp import compose, ws_rows
from tilefuse.ops.grouped_glu_mlp.api import problem_for
from tilefuse.ops.grouped_glu_mlp.op import compose_apply, route
from tilefuse.ops.grouped_glu_mlp.reference import assert_counts_on_device, grouped_glu_mlp_unfused, random_inputs
from tilefuse.ops.grouped_glu_mlp.ws_wgrad import descriptor


def p50(fn):
    return statistics.median(_host_p50_us(fn) for _ in range(3))


def layers(E, T, H, F, cfg):
    i = random_inputs([T // E] * E, H, F, torch.bfloat16, bias=False, device="cuda",
                      generator=torch.Generator().manual_seed(3))
    x, c, p, w1, w2 = i["x"], i["counts"], i["probs"], i["w1"], i["w2"]
    ends = torch.cumsum(c, 0, dtype=torch.int32)
    tile = compose.gluon_tiles(cfg)
    z = torch.empty(T, 2 * F, dtype=x.dtype, device="cuda")
    h = torch.empty(T, F, dtype=x.dtype, device="cuda")
    y = torch.empty(T, H, dtype=x.dtype, device="cuda")
    glu = (h, p, None, 0, 32)
    rn, rs = tile[2], tile[3]
    items = {
        "tilefuse.grouped_glu_mlp (as called)": lambda: tilefuse.grouped_glu_mlp(x, c, p, w1, w2),
        "plain composition (grouped_glu_mlp_unfused)": lambda: grouped_glu_mlp_unfused(x, c, p, w1, w2,
                                                                                       glu_interleave=32),
        "  api.problem_for + op.route": lambda: route(problem_for(x, w2, "swiglu", 32, False), x.device),
        "  op.compose_apply (autograd.Function)": lambda: compose_apply(x, c, p, w1, w2, None, None, "swiglu", 32,
                                                                        tuned=cfg),
        "  compose.forward": lambda: compose.forward(x, c, p, w1, w2, None, None, "swiglu", 32, rn, rs),
        "    torch.cumsum(counts)": lambda: torch.cumsum(c, 0, dtype=torch.int32),
        "    assert_counts_on_device": lambda: assert_counts_on_device(c, ends, T),
        "    ws_rows.launch fc1 + GLU": lambda: ws_rows.launch(x, w1, z, c, rows=True, block_n=rn, stages=rs,
                                                             glu=glu),
        "    ws_rows.launch fc2": lambda: ws_rows.launch(h, w2, y, c, rows=True, block_n=rn, stages=rs),
        "      ws_rows.applies fc2": lambda: ws_rows.applies(h, w2, y, c, rows=True, block_n=rn, stages=rs),
        "      3 descriptors (fc2's)": lambda: (descriptor(h, [128, 64]), descriptor(w2.view(-1, F), [rn, 64]),
                                                 descriptor(y, [64, rn])),
        "    torch._grouped_mm fc2 (CUTLASS)": lambda: torch._grouped_mm(h, w2.transpose(-2, -1), offs=ends),
        "    torch.empty (T, H)": lambda: torch.empty(T, H, dtype=x.dtype, device="cuda"),
    }
    out = {}
    for name, fn in items.items():
        fn()
        out[name] = p50(fn)
    return out, (x, c, p, w1, w2)


def profile(fn, n=300):
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(n):
        fn()
    prof.disable()
    torch.cuda.synchronize()
    s = io.StringIO()
    pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(28)
    return s.getvalue()


def main():
    print(torch.__version__, torch.cuda.get_device_name(), "level", tilefuse.policy.get_level())
    E3, T3, H3, F3 = 128, 65536, 2048, 768
    cfg = route(problem_for(
        torch.empty(T3, H3, dtype=torch.bfloat16, device="meta"),
        torch.empty(E3, H3, F3, dtype=torch.bfloat16, device="meta"), "swiglu", 32, False), torch.device("cuda"))
    print("shape 3's table entry:", cfg)
    small = (8, 2048, 512, 256)
    sp = problem_for(torch.empty(small[1], small[2], dtype=torch.bfloat16, device="meta"),
                     torch.empty(small[0], small[2], small[3], dtype=torch.bfloat16, device="meta"),
                     "swiglu", 32, False)
    tuning.register("grouped_glu_mlp", {sp: cfg})
    results = {}
    for label, shape in (("shape 3", (E3, T3, H3, F3)), ("small", small)):
        results[label], args = layers(*shape, cfg)
        if label == "small":
            x, c, p, w1, w2 = args
            print(f"\ncProfile, 300 forward calls, {label} (tilefuse.grouped_glu_mlp):")
            print(profile(lambda: tilefuse.grouped_glu_mlp(x, c, p, w1, w2)))
            leaves = [t.detach().requires_grad_() for t in (x, p, w1, w2)]
            dy = torch.randn_like(x)
            print(f"\ncProfile, 300 forward + backward calls, {label} (tilefuse.grouped_glu_mlp):")
            print(profile(lambda: torch.autograd.grad(tilefuse.grouped_glu_mlp(leaves[0], c, *leaves[1:]), leaves,
                                                      dy)))
            print(f"\ncProfile, 300 forward calls, {label} (plain composition):")
            print(profile(lambda: grouped_glu_mlp_unfused(x, c, p, w1, w2, glu_interleave=32)))
        torch.cuda.empty_cache()
    print("\n| layer | us, shape 3 | us, small |\n|---|---|---|")
    for name in results["shape 3"]:
        print(f"| {name} | {results['shape 3'][name]:.1f} | {results['small'][name]:.1f} |")


if __name__ == "__main__":
    main()
