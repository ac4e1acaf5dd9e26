"""grouped_glu_mlp's compose-route row GEMMs warp-specialised in Gluon (ws_rows.py): fc1, fc2
(the weight read by rows) and the two dgrads (by columns) over each expert's ragged rows.

The contract: ws_rows.launch computes torch._grouped_mm's GEMM, bit for bit CUTLASS's for bf16
on every problem compared (each chains the K chunks in order on one fp32 accumulator), or
declines (False) and the caller runs torch._grouped_mm. On the CPU: the sm_90 compile of each
candidate tile (no spills, 4 + 4 + 1 warps, the ring and epilogue buffers within shared memory,
one TMA store a consumer). On a Hopper GPU: the layout contract, and against torch._grouped_mm
and float64 with experts ending inside a tile, empty experts, T below a tile, N off the tile,
K off 64 by rows, few persistent programs, outputs poisoned with NaN. The route with a rows
tile (dispatch, compile, CUDA graphs): tests/test_grouped_ws_wgrad.py.
"""

import pytest
import torch

from tilefuse.ops.grouped_glu_mlp import ws_rows
from tilefuse.utils import normwise_rel_error

from sm90_helpers import PTXAS, nvidia_compiler_available, run_compile_script

HOPPER = torch.cuda.is_available() and ws_rows.available(torch.device("cuda"))
TILES = ((256, 3), (128, 5), (128, 6))

_SM90 = r'''
import json
import triton
from sm90_helpers import cubin_report
from triton.backends.compiler import GPUTarget
from triton.experimental.gluon import language as gl
from triton.experimental.gluon._runtime import GluonASTSource
from tilefuse.ops.grouped_glu_mlp import ws_rows as W

out = {}
# (by rows, GLU activation code or -1, interleave (0: the halves layout), fc1 bias)
cases = [(True, -1, 8, False), (False, -1, 8, False), (True, 0, 32, False), (True, 1, 8, True), (True, 0, 64, True),
         (True, 0, 0, False), (True, 1, 0, True)]
for rows, glu, interleave, bias in cases:
    for block_n, stages in ((256, 3), (128, 5), (128, 6)):
        for dtype, name in ((gl.bfloat16, "bf16"), (gl.float16, "fp16")):
            def desc(shape):
                return "tensordesc<%s[%d, %d],%s>" % (name, shape[0], shape[1],
                                                      gl.NVMMASharedLayout.get_default_for(shape, dtype))
            part = block_n // 2 if interleave == 0 else block_n   # the halves layout's two blocks
            b = [part, W.BLOCK_K] if rows else [W.BLOCK_K, block_n]
            sig = {"a_desc": desc([W.BLOCK_M, W.BLOCK_K]), "b_desc": desc(b),
                   "c_desc": desc([W.BLOCK_M // 2, part]), "counts_ptr": "*i32", "c_ptr": "*" + name,
                   "N": "i32", "K": "i32", "E": "i32", "n_tiles": "i32", "ldc": "i32", "h_ptr": "*" + name,
                   "probs_ptr": "*fp32", "b1_ptr": "*" + name, "ldh": "i32", "b1_stride": "i32", "F": "i32"}
            ce = dict(ROWS=rows, BLOCK_M=W.BLOCK_M, BLOCK_N=block_n, BLOCK_K=W.BLOCK_K, STAGES=stages, GLU=glu,
                      INTERLEAVE=interleave, HAS_BIAS=bias, CONSUMER_REGS=W.CONSUMER_REGS,
                      PRODUCER_REGS=W.PRODUCER_REGS)
            src = GluonASTSource(W.ws_rows_kernel, {**sig, **{k: "constexpr" for k in ce}}, constexprs=ce)
            c = triton.compile(src, target=GPUTarget("cuda", 90, 32),
                               options={"num_warps": 4, "maxnreg": W.MAXNREG})
            u = cubin_report(c)
            sass = u["sass"]
            out[f"{'rows' if rows else 'cols'}-glu{glu}-i{interleave}-{name}-n{block_n}-s{stages}"] = {
                "stack": u["stack"], "smem": c.metadata.shared, "warps": c.metadata.num_warps,
                "hgmma": sass.count("HGMMA"), "setmaxnreg": sass.count("USETMAXREG"),
                "tma_stores": sass.count("UTMASTG"), "limit": W._smem_bytes(block_n, stages)}
print(json.dumps(out))
'''


@pytest.mark.skipif(not nvidia_compiler_available() or ws_rows.gluon is None,
                    reason="needs Triton's NVIDIA backend with Gluon")
@pytest.mark.parametrize("ptxas", PTXAS)
def test_ws_rows_compiles_for_sm90_without_spills(ptxas):
    """Both weight layouts at the candidate tiles, bf16 and fp16, and fc1 with the GLU epilogue
    (both activations, interleaves 8 to 64 and the halves layout, with and without bias): no
    stack, 12 warps, the registers reallocated, four k16 wgmma a chunk in each consumer, one TMA
    store a consumer (its 64 rows wholly inside an expert; two in the halves layout, z's gate
    and up halves F apart), shared memory within the 227 KB and the bound ``applies`` checks
    (the masked stores go out from the accumulator's layout: a layout change would take
    scratch shared memory, 16 KB, that the 6-slot ring does not leave)."""
    usage = run_compile_script(_SM90, ptxas=ptxas)
    assert len(usage) == 7 * 3 * 2
    for name, u in usage.items():
        assert u["stack"] == 0 and u["warps"] == 12 and u["setmaxnreg"] > 0, (name, u)
        assert u["hgmma"] == 2 * 4 and u["tma_stores"] == (4 if "-i0-" in name else 2), (name, u)
        assert u["smem"] <= min(u["limit"], 227 * 1024), (name, u)


def test_the_tile_bound_leaves_out_what_does_not_fit():
    assert ws_rows._smem_bytes(256, 3) <= ws_rows.SMEM < ws_rows._smem_bytes(256, 4)
    assert ws_rows._smem_bytes(128, 6) <= ws_rows.SMEM < ws_rows._smem_bytes(128, 7)


def test_glu_applies_to_whole_interleave_groups_only():
    """The GLU epilogue needs each tile to hold whole (gate, up) groups: interleaves 8 to
    block_n / 2, powers of two, or the halves layout (None or 0) with F a multiple of
    block_n / 2."""
    T, F, E = 50, 96, 3
    h = torch.empty(T, F).bfloat16()
    probs, b1 = torch.rand(T), torch.zeros(E, 2 * F).bfloat16()

    def ok(block_n=256, h=h, probs=probs, b1=b1, act=0, interleave=32):
        return ws_rows.glu_applies((T, 2 * F), block_n, h, probs, b1, act, interleave)
    assert ok() and ok(b1=None) and ok(act=1) and ok(interleave=8) and ok(interleave=128)
    assert ok(block_n=128, interleave=64) and not ok(block_n=128, interleave=128)
    for interleave in (4, 24, 256, 32.0, True):
        assert not ok(interleave=interleave), interleave
    # the halves layout (None, or 0 from the custom ops): F a multiple of half the tile
    h128, b1_256 = torch.empty(T, 128).bfloat16(), torch.zeros(E, 256).bfloat16()
    for interleave in (None, 0):
        assert ws_rows.glu_applies((T, 256), 256, h128, probs, b1_256, 0, interleave)
        assert ws_rows.glu_applies((T, 256), 128, h128, probs, None, 1, interleave)
        assert not ok(interleave=interleave) and not ok(block_n=128, interleave=interleave)   # F 96
    assert not ok(act=2) and not ok(h=torch.empty(T, F + 8).bfloat16()) and not ok(h=torch.empty(T, 2 * F).bfloat16()[:, ::2])
    assert not ok(probs=torch.rand(2 * T)[::2]) and not ok(b1=torch.zeros(2 * F, E).bfloat16().t())


def test_launch_declines_off_hopper():
    """Where the kernel cannot run (the CPU, the interpreter, GPUs without wgmma) launch says
    so and writes nothing: the caller's torch._grouped_mm runs."""
    if HOPPER:
        pytest.skip("the kernel runs here")
    a = torch.randn(100, 64).bfloat16()
    w = torch.randn(2, 128, 64).bfloat16()
    c = torch.full((100, 128), 7.0).bfloat16()
    counts = torch.tensor([60, 40], dtype=torch.int32)
    assert not ws_rows.launch(a, w, c, counts, rows=True)
    assert bool((c == 7).all())


# --- Hopper only ---------------------------------------------------------------------------

def _problem(counts, H, F, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    T, E = sum(counts), len(counts)
    t = {k: torch.randn(T, n, generator=g).to(dtype).cuda() for k, n in (("x", H), ("dy", H), ("h", F),
                                                                          ("dz", 2 * F))}
    w1 = (torch.randn(E, 2 * F, H, generator=g) * 0.05).to(dtype).cuda()
    w2 = (torch.randn(E, H, F, generator=g) * 0.05).to(dtype).cuda()
    # role: (a, w, by rows, torch._grouped_mm's b)
    return {"fc1": (t["x"], w1, True, w1.transpose(-2, -1)), "fc2": (t["h"], w2, True, w2.transpose(-2, -1)),
            "fc2 dgrad": (t["dy"], w2, False, w2), "fc1 dgrad": (t["dz"], w1, False, w1)}


def _reference(a, w, rows, counts):
    out, s = [], 0
    for e, c in enumerate(counts):
        out.append(a[s:s + c].double() @ (w[e].double().t() if rows else w[e].double()))
        s += c
    return torch.cat(out)


@pytest.mark.skipif(not HOPPER, reason="needs a Hopper GPU (wgmma) and Gluon")
def test_applies_checks_the_layout_contract():
    a = torch.randn(300, 128, device="cuda").bfloat16()
    w_rows = torch.randn(3, 192, 128, device="cuda").bfloat16()   # (E, N, K)
    w_cols = torch.randn(3, 128, 192, device="cuda").bfloat16()   # (E, K, N)
    c = torch.empty(300, 192, device="cuda", dtype=torch.bfloat16)
    counts = torch.tensor([100, 0, 200], dtype=torch.int32, device="cuda")

    def ok(a=a, w=w_rows, c=c, counts=counts, rows=True, tile=(256, 3)):
        return ws_rows.applies(a, w, c, counts, rows=rows, block_n=tile[0], stages=tile[1])
    assert ok() and ok(w=w_cols, rows=False) and ok(tile=(128, 6))
    assert not ok(tile=(64, 3)) and not ok(tile=(256, 4)) and not ok(tile=(128, 7)) and not ok(tile=(128, 1))
    assert not ok(w=w_cols) and not ok(w=w_rows, rows=False)                      # shapes of the layout
    assert not ok(a=a.float(), w=w_rows.float(), c=c.float())                      # 16-bit only
    assert not ok(w=w_rows.half())                                                 # one dtype
    assert not ok(a=a[:, :120], w=w_cols[:, :120].contiguous(), rows=False)        # K off 64 by columns
    assert ok(a=a[:, :120], w=w_rows[:, :, :120].contiguous())                    # by rows it is fine
    assert not ok(w=w_rows.transpose(1, 2).contiguous().transpose(1, 2))           # w not contiguous
    assert not ok(a=a[:0], c=c[:0])                                                # no rows
    assert not ok(counts=counts[:2]) and not ok(counts=torch.zeros(6, dtype=torch.int32, device="cuda")[::2])
    assert not ok(c=torch.empty(300, 196, device="cuda", dtype=torch.bfloat16)[:, :192])   # 392-byte rows


@pytest.mark.skipif(not HOPPER, reason="needs a Hopper GPU (wgmma) and Gluon")
@pytest.mark.parametrize("counts,H,F", [([300, 0, 211, 17], 256, 192), ([64, 128, 192], 128, 128),
                                        ([1, 63, 65, 0, 640], 384, 256), ([0, 0, 513, 0], 256, 320),
                                        ([40], 64, 96), ([130, 0, 0, 2], 200, 64), ([5, 7, 90, 20], 128, 136)])
@pytest.mark.parametrize("tile", TILES)
@pytest.mark.parametrize("programs", [None, 1, 3])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_ws_rows_is_bitwise_grouped_mm(counts, H, F, tile, programs, dtype):
    """Each of the four GEMMs where the kernel takes it (by columns K must be a multiple of 64):
    bf16 bitwise torch._grouped_mm (CUTLASS); fp16's _grouped_mm is torch's per-group loop,
    another summation, so there close; both within a rounding of float64, NaN-poisoned rows
    all written."""
    c = torch.tensor(counts, dtype=torch.int32, device="cuda")
    offs = torch.cumsum(c, 0).to(torch.int32)
    ran = 0
    for role, (a, w, rows, b) in _problem(counts, H, F, dtype, sum(counts) + H).items():
        got = torch.full((a.shape[0], b.shape[-1]), float("nan"), dtype=dtype, device="cuda")
        if not ws_rows.launch(a, w, got, c, rows=rows, block_n=tile[0], stages=tile[1], programs=programs):
            assert not rows and a.shape[1] % 64, role   # only K off 64 by columns declines
            continue
        ran += 1
        want = torch._grouped_mm(a, b, offs=offs)
        if dtype == torch.bfloat16:
            assert torch.equal(got.view(torch.int16), want.view(torch.int16)), role
        else:
            assert normwise_rel_error(got, want) < 2 * torch.finfo(dtype).eps, role
        assert normwise_rel_error(got, _reference(a, w, rows, counts)) < 2 * torch.finfo(dtype).eps, role
    assert ran >= 2


@pytest.mark.skipif(not HOPPER, reason="needs a Hopper GPU (wgmma) and Gluon")
@pytest.mark.parametrize("counts,H,F", [([300, 0, 211, 17], 256, 192), ([1, 63, 65, 0, 640], 384, 256),
                                        ([40], 64, 96), ([5, 7, 90, 20], 128, 136)])
@pytest.mark.parametrize("tile", [(256, 3), (128, 5)])
@pytest.mark.parametrize("activation,interleave,bias", [("swiglu", 32, False), ("geglu", 32, True),
                                                        ("swiglu", 8, True), ("geglu", 64, False),
                                                        ("swiglu", None, True), ("geglu", None, False)])
@pytest.mark.parametrize("probs_dtype", [torch.float32, torch.bfloat16])
def test_the_glu_epilogue_is_bitwise_the_glu_kernel(counts, H, F, tile, activation, interleave, bias, probs_dtype):
    """fc1 with the GLU epilogue, interleaved or in the halves layout (None): z bitwise
    torch._grouped_mm's, h bitwise compose_glu_kernel's from that z (the same float32 math on
    the same rounded values), rows past the experts and NaN-poisoned outputs all written."""
    from tilefuse.ops.grouped_glu_mlp import compose
    from tilefuse.ops.grouped_glu_mlp.launch import ACTIVATIONS
    if F % (interleave or tile[0] // 2) or (interleave or 0) > tile[0] // 2:
        pytest.skip("the interleave (or half the tile, for the halves layout) does not fit the tile or F")
    g = torch.Generator().manual_seed(sum(counts) + F)
    T, E = sum(counts), len(counts)
    x = torch.randn(T, H, generator=g).bfloat16().cuda()
    w1 = (torch.randn(E, 2 * F, H, generator=g) * 0.05).bfloat16().cuda()
    b1 = (torch.randn(E, 2 * F, generator=g) * 0.1).bfloat16().cuda() if bias else None
    probs = torch.rand(T, generator=g).to(probs_dtype).cuda()
    c = torch.tensor(counts, dtype=torch.int32, device="cuda")
    ends = torch.cumsum(c, 0).to(torch.int32)
    z = torch.full((T, 2 * F), float("nan"), dtype=torch.bfloat16, device="cuda")
    h = torch.full((T, F), float("nan"), dtype=torch.bfloat16, device="cuda")
    assert ws_rows.launch(x, w1, z, c, rows=True, block_n=tile[0], stages=tile[1],
                          glu=(h, probs, b1, ACTIVATIONS[activation], interleave))
    want_z = torch._grouped_mm(x, w1.transpose(-2, -1), offs=ends)
    want_h = torch.empty_like(h)
    glu_kernel = compose._glue_kernels()[0]
    glue = compose.DEFAULT_GLUE
    glu_kernel[(-(-T // glue.glu_block_m), -(-F // glue.glu_block_f))](
        want_z, b1 if b1 is not None else want_z, ends, probs, want_h, T, F, E, want_z.stride(0), want_h.stride(0),
        b1.stride(0) if b1 is not None else 0, ACT=ACTIVATIONS[activation], INTERLEAVE=interleave or 0, HAS_BIAS=bias,
        BLOCK_M=glue.glu_block_m, BLOCK_F=glue.glu_block_f, E_CHUNK=compose.E_CHUNK, num_warps=glue.num_warps)
    assert torch.equal(z.view(torch.int16), want_z.view(torch.int16))
    assert torch.equal(h.view(torch.int16), want_h.view(torch.int16))


@pytest.mark.skipif(not HOPPER, reason="needs a Hopper GPU (wgmma) and Gluon")
def test_later_launches_skip_the_jit_and_give_its_bits():
    """ws_rows and ws_wgrad launch through triton_common.SpecializingLauncher: after the first
    launch of a specialization the compiled kernel's launcher runs (the JIT count does not
    move), with the JIT's results bit for bit; a new specialization (a row stride off 16
    elements) goes through the JIT once."""
    from tilefuse.ops import triton_common
    from tilefuse.ops.grouped_glu_mlp import ws_wgrad
    counts = [300, 0, 211, 17]
    c = torch.tensor(counts, dtype=torch.int32, device="cuda")
    a, w, rows, b = _problem(counts, 256, 192, torch.bfloat16, 5)["fc1"]
    x, dz = a, torch.randn(a.shape[0], 384, device="cuda").bfloat16()

    def run():
        z = torch.full((a.shape[0], b.shape[-1]), float("nan"), dtype=a.dtype, device="cuda")
        dw = torch.full((len(counts), 384, 256), float("nan"), dtype=a.dtype, device="cuda")
        assert ws_rows.launch(a, w, z, c, rows=True) and ws_wgrad.launch(dz, x, dw, c)
        return z, dw
    with triton_common.jit_launches():
        want = run()
    run()
    before = triton_common.jit_launch_count()
    got = run()
    assert triton_common.jit_launch_count() == before, "the direct route did not run"
    for g, wnt in zip(got, want):
        assert torch.equal(g.view(torch.int16), wnt.view(torch.int16))
    wide = torch.full((a.shape[0], b.shape[-1] + 8), float("nan"), dtype=a.dtype, device="cuda")
    assert ws_rows.launch(a, w, wide[:, :b.shape[-1]], c, rows=True)
    assert triton_common.jit_launch_count() == before + 1
    assert torch.equal(wide[:, :b.shape[-1]].view(torch.int16), want[0].view(torch.int16))
