"""Issue 16 probe (GPU; prepared): how much of ws_rows' time at shape 1 is its epilogue? The
bound on what an epilogue-overlapping schedule (ping-pong consumers, an epilogue warp group)
could recover, measured before building one.

ws_rows.py is loaded with one edit (``EDIT``): each consumer warp group, after its tile's
products, skips the epilogue (the shared-memory store, the TMA or register stores and, for fc1,
the GLU) and instead reduces its accumulator to one value and stores it only if it is 1e38
(never), so the products stay live and are computed. The shipped kernel and the variant then
time the four row GEMMs of a bf16 step (fc1 with the GLU in its epilogue as the table runs it at
shape 1, fc2, fc2 dgrad, fc1 dgrad) at the spec's three shapes, balanced counts, interleaved,
graph replay, 256-column tiles on a 3-slot ring. The variant's outputs are garbage; the shipped
kernel's are checked bitwise against torch._grouped_mm first.

    PYTHONPATH=src python3 benchmarks/results/2026-12-04-h200-af/epilogue_bound.py [--rounds 7] [--compile-only]

``--compile-only`` (no GPU needed): compile the variant for sm_90 and print its registers,
stack and HGMMA count beside the shipped kernel's.
"""
import argparse
import importlib.util
import json
import tempfile
from pathlib import Path

import torch

from tilefuse.ops.grouped_glu_mlp import ws_rows

EDIT_START = "                end = rows_before + m\n"
EDIT_END = "        tma.store_wait(0)\n\n    # One wrapper"
NO_EPILOGUE = """                # probe: no epilogue; the products stay live through one never-taken store
                peak = gl.max(gl.max(acc, axis=1), axis=0)
                if peak == 1.0e38:
                    gl.store(c_ptr + row0.to(gl.int64) * ldc, peak.to(c_ptr.dtype.element_ty))
"""


def variant():
    """ws_rows.py with the epilogue edit, imported as a module of tilefuse.ops.grouped_glu_mlp."""
    src = Path(ws_rows.__file__).read_text()
    assert src.count(EDIT_START) == 1 and src.count(EDIT_END) == 1, "ws_rows.py changed: the edit no longer applies"
    i, j = src.index(EDIT_START), src.index(EDIT_END)
    src = src[:i] + NO_EPILOGUE + src[j:]
    path = Path(tempfile.mkdtemp()) / "ws_rows_no_epilogue.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location(f"tilefuse.ops.grouped_glu_mlp.{path.stem}", path)
    mod = importlib.util.module_from_spec(spec)
    mod.__package__ = "tilefuse.ops.grouped_glu_mlp"
    spec.loader.exec_module(mod)
    return mod


def compile_report(mod, rows, glu, interleave):
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon._runtime import GluonASTSource
    import sys
    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tests"))
    from sm90_helpers import cubin_report
    block_n, stages = 256, 3

    def desc(shape):
        return "tensordesc<bf16[%d, %d],%s>" % (shape[0], shape[1], gl.NVMMASharedLayout.get_default_for(shape, gl.bfloat16))
    part = block_n // 2 if interleave == 0 else block_n
    b = [part, mod.BLOCK_K] if rows else [mod.BLOCK_K, block_n]
    sig = {"a_desc": desc([mod.BLOCK_M, mod.BLOCK_K]), "b_desc": desc(b), "c_desc": desc([mod.BLOCK_M // 2, part]),
           "counts_ptr": "*i32", "c_ptr": "*bf16", "N": "i32", "K": "i32", "E": "i32", "n_tiles": "i32", "ldc": "i32",
           "h_ptr": "*bf16", "probs_ptr": "*fp32", "b1_ptr": "*bf16", "ldh": "i32", "b1_stride": "i32", "F": "i32"}
    ce = dict(ROWS=rows, BLOCK_M=mod.BLOCK_M, BLOCK_N=block_n, BLOCK_K=mod.BLOCK_K, STAGES=stages, GLU=glu,
              INTERLEAVE=interleave, HAS_BIAS=False, CONSUMER_REGS=mod.CONSUMER_REGS, PRODUCER_REGS=mod.PRODUCER_REGS)
    src = GluonASTSource(mod.ws_rows_kernel, {**sig, **{k: "constexpr" for k in ce}}, constexprs=ce)
    c = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4, "maxnreg": mod.MAXNREG})
    u = cubin_report(c)
    return {"stack": u["stack"], "hgmma": u["sass"].count("HGMMA"), "tma_stores": u["sass"].count("UTMASTG")}


def compile_only():
    probe = variant()
    for rows, glu, interleave in ((True, -1, 8), (False, -1, 8), (True, 0, 32)):
        print(json.dumps({"rows": rows, "glu": glu, "shipped": compile_report(ws_rows, rows, glu, interleave),
                          "no epilogue": compile_report(probe, rows, glu, interleave)}), flush=True)


def time_shapes(rounds):
    from tilefuse.ops.grouped_glu_mlp.launch import ACTIVATIONS
    from tilefuse.ops.grouped_glu_mlp.tune import DEFAULT_SHAPES
    from tilefuse.tuning import timing
    probe = variant()
    for index, (E, T, H, F) in enumerate(DEFAULT_SHAPES, 1):
        g = torch.Generator(device="cuda").manual_seed(index)
        counts = torch.full((E,), T // E, dtype=torch.int32, device="cuda")
        offs = torch.cumsum(counts, 0).to(torch.int32)

        def randn(*shape, scale=1.0):
            return (torch.randn(shape, generator=g, device="cuda") * scale).to(torch.bfloat16)
        x, dy = randn(T, H), randn(T, H)
        w1, w2 = randn(E, 2 * F, H, scale=H ** -0.5), randn(E, H, F, scale=F ** -0.5)
        probs = torch.rand(T, generator=g, device="cuda")
        z, h, dh, dz = (torch.empty(T, n, dtype=torch.bfloat16, device="cuda") for n in (2 * F, F, F, 2 * F))
        y, dx = (torch.empty(T, H, dtype=torch.bfloat16, device="cuda") for _ in range(2))
        glu = (h, probs, None, ACTIVATIONS["swiglu"], 32)     # fc1's GLU in its epilogue, interleave 32
        gemms = {"fc1 + GLU": (x, w1, z, True, glu), "fc2": (h, w2, y, True, None),
                 "fc2 dgrad": (dy, w2, dh, False, None), "fc1 dgrad": (dz.normal_(), w1, dx, False, None)}
        want = torch._grouped_mm(x, w1.transpose(1, 2), offs=offs)
        got = torch.full_like(z, float("nan"))
        ok = ws_rows.launch(x, w1, got, counts, rows=True)
        print(f"shape {index}: shipped fc1 bitwise torch._grouped_mm: {ok and torch.equal(got.view(torch.int16), want.view(torch.int16))}",
              flush=True)
        providers = {}
        for name, (a, w, c, rows, g_) in gemms.items():
            for label, mod in (("shipped", ws_rows), ("no epilogue", probe)):
                providers[f"{name}, {label}"] = (lambda a=a, w=w, c=c, rows=rows, g_=g_, mod=mod:
                                                 mod.launch(a, w, c, counts, rows=rows, glu=g_))
        res = timing.interleaved(providers, rounds=rounds, graphs=True)
        total = {"shipped": 0.0, "no epilogue": 0.0}
        for name in gemms:
            s, n = res[f"{name}, shipped"], res[f"{name}, no epilogue"]
            total["shipped"] += s.median_ms
            total["no epilogue"] += n.median_ms
            print(f"  {name:10s} shipped {s.median_ms:.3f} ms, no epilogue {n.median_ms:.3f} ms "
                  f"({100 * (1 - n.median_ms / s.median_ms):.1f}% of the shipped time)", flush=True)
        print(f"  four GEMMs: shipped {total['shipped']:.3f} ms, no epilogue {total['no epilogue']:.3f} ms", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--compile-only", action="store_true")
    args = ap.parse_args()
    if args.compile_only:
        compile_only()
    else:
        time_shapes(args.rounds)


if __name__ == "__main__":
    main()
