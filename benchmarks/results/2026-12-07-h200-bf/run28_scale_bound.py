"""Run 28 (GPU): an upper bound on what the K walk's per-chunk scale loads cost the ws kernel.

Run 27's Nsight Compute put 33-42% of the ws kernel's warp stalls on global loads
(L1TEX scoreboard) at shape 2: in the store roles the only global loads of the K walk are each
chunk's row scales (a 64-vector a warp group) and the weight's block scale, loaded after the
chunk's wgmma is issued and used when it is rescaled. Here a copy of ws_kernels.py (written to
a temporary file and loaded under the package, so its relative imports resolve) loads chunk 0's
scales for every chunk (the same address each chunk: loop-invariant, so the loads leave the K
walk), the instruction mix otherwise the same. Its outputs are wrong by design; only its time
is compared. Beside it a real form ("ahead"): _chunk_pairs loads the next pair's scales right
after this pair's two wgmma are issued (carried across the loop's back edge, where no wgmma is
in flight), so their latency has a whole pair to pass; its outputs must be the shipped
module's bit for bit. fc2 (the store role) and the fc2 dgrad + dGLU at shapes 2 and 3,
do_bench medians of interleaved rounds against the shipped module. A gain under a few percent
closes the lever.

    PYTHONPATH=src python3 benchmarks/results/2026-12-07-h200-bf/run28_scale_bound.py [--rounds 4]
"""
import argparse
import importlib.util
import tempfile
from pathlib import Path

import torch
import triton

from tilefuse.ops.grouped_glu_mlp import recipes, ws_kernels

_spec = importlib.util.spec_from_file_location("run26_pingpong", Path(__file__).with_name("run26_pingpong.py"))
PP = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(PP)


HOISTED = [("        a_scale = gl.load(a_scale_ptr + kb * a_scale_ld + rows64, mask=rmask, other=0.0)\n"
            "        b_scale = gl.load(bs_base + kb * bs_k)\n",
            "        a_scale = gl.load(a_scale_ptr + rows64, mask=rmask, other=0.0)\n"
            "        b_scale = gl.load(bs_base)\n")]
# _chunk_pairs with the next pair's scales loaded under this pair's wgmma (_issue's own scale
# loads then go unused, and the compiler drops them)
AHEAD = [("""        for j in range(k_tiles // 2):
            pa, sa, sb = _issue(""", """        na, nb = _scales(a_scale_ptr, bs_base, rows64, rmask, 0, k_tiles, a_scale_ld, bs_k)
        na2, nb2 = _scales(a_scale_ptr, bs_base, rows64, rmask, 1, k_tiles, a_scale_ld, bs_k)
        for j in range(k_tiles // 2):
            pa, sa, sb = _issue("""),
         ("""            pb, sa2, sb2 = _issue(a_s, b_s, ready, a_scale_ptr, bs_base, rows64, rmask, part2, it + 1, 2 * j + 1,
                                  a_scale_ld, bs_k, WG, HALF, STAGES)
""", """            pb, sa2, sb2 = _issue(a_s, b_s, ready, a_scale_ptr, bs_base, rows64, rmask, part2, it + 1, 2 * j + 1,
                                  a_scale_ld, bs_k, WG, HALF, STAGES)
            sa, sb, sa2, sb2 = na, nb, na2, nb2
            na, nb = _scales(a_scale_ptr, bs_base, rows64, rmask, 2 * j + 2, k_tiles, a_scale_ld, bs_k)
            na2, nb2 = _scales(a_scale_ptr, bs_base, rows64, rmask, 2 * j + 3, k_tiles, a_scale_ld, bs_k)
"""),
         ("""            pa, sa, sb = _issue(a_s, b_s, ready, a_scale_ptr, bs_base, rows64, rmask, part, it, k_tiles - 1,
                                a_scale_ld, bs_k, WG, HALF, STAGES)
            part = warpgroup_mma_wait(num_outstanding=0, deps=[pa])""",
          """            pa, sa, sb = _issue(a_s, b_s, ready, a_scale_ptr, bs_base, rows64, rmask, part, it, k_tiles - 1,
                                a_scale_ld, bs_k, WG, HALF, STAGES)
            sa, sb = na, nb
            part = warpgroup_mma_wait(num_outstanding=0, deps=[pa])"""),
         ("""    @gluon.jit
    def _chunk_pairs(""", """    @gluon.jit
    def _scales(a_scale_ptr, bs_base, rows64, rmask, kb, k_tiles, a_scale_ld, bs_k):
        kb = gl.minimum(kb, k_tiles - 1)
        return gl.load(a_scale_ptr + kb * a_scale_ld + rows64, mask=rmask, other=0.0), gl.load(bs_base + kb * bs_k)

    @gluon.jit
    def _chunk_pairs(""")]


def variant(name, edits):
    src = Path(ws_kernels.__file__).read_text()
    for old, new in edits:
        assert src.count(old) == 1, old
        src = src.replace(old, new)
    path = Path(tempfile.mkdtemp()) / f"ws_{name}.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location(f"tilefuse.ops.grouped_glu_mlp.ws_{name}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=4)
    args = ap.parse_args()
    print(torch.cuda.get_device_name(), torch.__version__, triton.__version__, flush=True)
    mods = {"shipped": ws_kernels, "hoisted": variant("hoisted", HOISTED), "ahead": variant("ahead", AHEAD)}
    for s in (2, 3):
        E, T, H, F = PP.SHAPES[s]
        qa, qw, z, probs, counts = PP._problem(E, T, H, F, [T // E] * E, seed=28 + s)
        g = torch.Generator(device="cuda").manual_seed(s)
        qh = recipes.quantize_rows("fp8_block", torch.randn(T, F, generator=g, device="cuda").bfloat16())
        qw2 = recipes.quantize_weight("fp8_block", (torch.randn(E, H, F, generator=g, device="cuda") * 0.02)
                                      .bfloat16())
        y = torch.empty(T, H, dtype=torch.bfloat16, device="cuda")
        outs = PP._outputs(T, F, True)
        fns = {}
        for name, m in mods.items():
            fns[f"fc2 {name}"] = lambda m=m: m.launch(qh, qw2, y, counts, N=H, probs=probs)
            fns[f"dGLU {name}"] = lambda m=m: m.launch(qa, qw, outs[0], counts, N=F, probs=probs,
                                                       dglu=(z, outs[1], 0, 32, outs[2]))
        ref = {}
        for n, fn in fns.items():
            assert fn()
            torch.cuda.synchronize()
            got = (y.clone(),) if n.startswith("fc2") else (outs[0].clone(), outs[2].data.clone(), outs[2].scales.clone())
            if n.endswith("shipped"):
                ref[n.split()[0]] = got
            elif n.endswith("ahead"):
                same = all(torch.equal(a.view(torch.uint8), b.view(torch.uint8))
                           for a, b in zip(got, ref[n.split()[0]]))
                print(f"  shape {s}: {n} bitwise the shipped module's: {same}", flush=True)
        times = {n: [] for n in fns}
        for r in range(args.rounds):
            order = list(fns)[r % len(fns):] + list(fns)[:r % len(fns)]
            for n in order:
                times[n].append(triton.testing.do_bench(fns[n], warmup=25, rep=200))
        med = {n: sorted(t)[len(t) // 2] for n, t in times.items()}
        print(f"shape {s} {PP.SHAPES[s]}", flush=True)
        for n, t in times.items():
            base = med[n.split()[0] + " shipped"]
            print(f"  {n:13s} {med[n] * 1e3:8.1f} us  {2 * T * H * F / med[n] / 1e9:7.1f} TFLOP/s  "
                  f"{base / med[n]:.3f}x shipped [rounds {min(t) * 1e3:.1f}-{max(t) * 1e3:.1f} us]", flush=True)


if __name__ == "__main__":
    main()
