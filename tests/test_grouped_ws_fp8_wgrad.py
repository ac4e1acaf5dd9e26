"""fp8_block's weight gradients warp-specialised in Gluon (ws_fp8_wgrad.py), which a ``ws``
config's backward runs (launch._wgrad).

The contract: grouped_wgrad_kernel's fp8_block result bit for bit, on Hopper through
ws_fp8_wgrad_kernel and elsewhere (the CPU, other GPUs, operands outside its layout) through
grouped_wgrad_kernel itself. On the CPU these tests check the dispatch and its fallback, the
launch's arguments and the sm_90 compile; on a Hopper GPU the kernel against
grouped_wgrad_kernel with experts sharing 128-token blocks, experts inside one block, empty
experts, few persistent programs and every ring depth, and against float64 of the
dequantized copies.
"""

import dataclasses

import pytest
import torch

from tilefuse import launches
from tilefuse.ops.grouped_glu_mlp import launch, recipes, ws_fp8_wgrad
from tilefuse.ops.grouped_glu_mlp.configs import heuristic
from tilefuse.utils import normwise_rel_error

from sm90_helpers import PTXAS, nvidia_compiler_available, run_compile_script

HOPPER = torch.cuda.is_available() and ws_fp8_wgrad.available(torch.device("cuda"))
WCFG = heuristic("wgrad", 2, "fp8_block")


def _copies(counts, N, M, device, seed=0, dtype=torch.bfloat16):
    """(A's and B's column-wise copies, counts, T) of random (T, N) and (T, M) tensors."""
    g = torch.Generator().manual_seed(seed)
    T = sum(counts)
    a = torch.randn(T, N, generator=g).to(dtype).to(device)
    b = (torch.randn(T, M, generator=g) * 3).to(dtype).to(device)
    qa, qb = recipes.quantize_cols("fp8_block", a), recipes.quantize_cols("fp8_block", b)
    return qa, qb, torch.tensor(counts, dtype=torch.int32, device=device), T


def _triton(qa, qb, counts, T, shape, dtype=torch.bfloat16):
    out = torch.full(shape, float("nan"), dtype=dtype, device=qa.data.device)
    launch._wgrad(qa, qb, out, counts, T, WCFG, "fp8_block")
    return out


def test_applies_only_where_the_kernel_runs(device):
    qa, qb, counts, T = _copies([100, 28, 0, 200], 256, 128, device)
    c = torch.empty(4, 256, 128, dtype=torch.bfloat16, device=device)
    assert ws_fp8_wgrad.applies(qa, qb, c, 128, 5) == HOPPER
    if HOPPER:   # the layout contract (the device is fine)
        assert not ws_fp8_wgrad.applies(qa, qb, c, 256, 5)                       # not a kernel tile
        assert not ws_fp8_wgrad.applies(qa, qb, c, 128, 1)
        assert not ws_fp8_wgrad.applies(qa, qb, c, 128, ws_fp8_wgrad.MAX_STAGES + 1)
        assert not ws_fp8_wgrad.applies(qa, qb, c.float(), 128, 5)               # 16-bit gradients
        assert not ws_fp8_wgrad.applies(qb, qa, c, 128, 5)                       # copies of other widths
        assert not ws_fp8_wgrad.applies(qa, qb, c.transpose(1, 2).contiguous().transpose(1, 2), 128, 5)
        narrow = dataclasses.replace(qa, data=qa.data[:, :128])                 # the copies' token counts differ
        assert not ws_fp8_wgrad.applies(narrow, qb, c, 128, 5)


def test_a_ws_wgrad_falls_back_to_the_triton_kernel_with_its_bits(device, monkeypatch):
    """launch._wgrad with ``ws``: the Gluon kernel on Hopper (recorded), else grouped_wgrad_kernel;
    the same bits either way, and TAKES_WGRAD off takes the Triton kernel everywhere."""
    counts = [70, 0, 45, 13]
    qa, qb, c, T = _copies(counts, 256, 128, device, seed=1)
    want = _triton(qa, qb, c, T, (4, 256, 128))
    for takes in (True, False):
        monkeypatch.setattr(ws_fp8_wgrad, "TAKES_WGRAD", takes)
        got = torch.full_like(want, float("nan"))
        with launches.counting() as launched:
            launch._wgrad(qa, qb, got, c, T, WCFG, "fp8_block", ws=True)
        assert launched["grouped_fp8_ws_wgrad"] == (1 if takes and HOPPER else 0)
        assert torch.equal(got.view(torch.int16), want.view(torch.int16))


def test_the_launch_hands_the_kernel_its_arguments_in_order(monkeypatch):
    """The host side of ws_fp8_wgrad.launch, which only a Hopper GPU reaches otherwise: its
    launcher gets every parameter of ws_fp8_wgrad_kernel (descriptors over the copies' float8
    data and the gradient viewed (E * N, M)), the constexprs in the kernel's order."""
    from tilefuse.ops.grouped_glu_mlp.ws_wgrad import _layout
    seen = []

    class Launcher:
        def launch_held(self, key, grid, args, constexprs):
            return False

        def launch_keyed(self, key, grid, args, constexprs):
            seen.append((grid, args, constexprs))

    qa, qb, counts, T = _copies([100, 28, 0, 200], 256, 128, "cpu")
    monkeypatch.setattr(ws_fp8_wgrad, "_launcher", lambda: Launcher())
    monkeypatch.setattr(ws_fp8_wgrad, "applies", lambda *a: True)
    c = torch.empty(4, 256, 128, dtype=torch.bfloat16)
    assert ws_fp8_wgrad.launch(qa, qb, c, counts, programs=3)
    (grid, args, constexprs), = seen
    names = ws_fp8_wgrad.ws_fp8_wgrad_kernel.arg_names
    assert len(args) + len(constexprs) == len(names)
    named = dict(zip(names, (*args, *constexprs)))
    assert grid == (3,) and named["n_tiles"] == 4 * 2 * 1 and (named["N"], named["M"]) == (256, 128)
    assert named["counts_ptr"] is counts and named["a_scale_ptr"] is qa.scales and named["b_scale_ptr"] is qb.scales
    assert (named["a_scale_ld"], named["b_scale_ld"]) == (256, 128)
    assert named["a_desc"].base.data_ptr() == qa.data.data_ptr() and named["a_desc"].base.dtype == torch.float8_e4m3fn
    assert named["b_desc"].block_shape == [128, 128] and named["c_desc"].block_shape == [64, 128]
    assert tuple(named["c_desc"].base.shape) == (4 * 256, 128)
    assert named["a_desc"].layout is _layout((128, 128), torch.float8_e4m3fn)
    assert (named["BLOCK_N"], named["BLOCK_M"], named["BLOCK_K"], named["STAGES"]) == (128, 128, 128,
                                                                                      ws_fp8_wgrad.MAX_STAGES)
    assert (named["CONSUMER_REGS"], named["PRODUCER_REGS"]) == (ws_fp8_wgrad.CONSUMER_REGS,
                                                                ws_fp8_wgrad.PRODUCER_REGS)


_SM90 = r'''
import json
import re
import triton
from sm90_helpers import cubin_report, loop_local_memory
from triton.backends.compiler import GPUTarget
from triton.experimental.gluon import language as gl
from triton.experimental.gluon._runtime import GluonASTSource
from tilefuse.ops.grouped_glu_mlp import ws_fp8_wgrad as W

def desc(shape, dtype, name):
    return "tensordesc<%s[%d, %d],%s>" % (name, shape[0], shape[1], gl.NVMMASharedLayout.get_default_for(shape, dtype))

out = {}
for stages in (W.MAX_STAGES, 3):
    for dtype, name in ((gl.bfloat16, "bf16"), (gl.float16, "fp16")):
        sig = {"a_desc": desc([W.BLOCK_N, W.BLOCK_K], gl.float8e4nv, "fp8e4nv"),
               "b_desc": desc([128, W.BLOCK_K], gl.float8e4nv, "fp8e4nv"),
               "c_desc": desc([W.BLOCK_N // 2, 128], dtype, name), "counts_ptr": "*i32", "a_scale_ptr": "*fp32",
               "b_scale_ptr": "*fp32", "N": "i32", "M": "i32", "n_tiles": "i32", "a_scale_ld": "i32",
               "b_scale_ld": "i32"}
        ce = dict(BLOCK_N=W.BLOCK_N, BLOCK_M=128, BLOCK_K=W.BLOCK_K, STAGES=stages, CONSUMER_REGS=W.CONSUMER_REGS,
                  PRODUCER_REGS=W.PRODUCER_REGS)
        src = GluonASTSource(W.ws_fp8_wgrad_kernel, {**sig, **{k: "constexpr" for k in ce}}, constexprs=ce)
        c = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4, "maxnreg": W.MAXNREG})
        u = cubin_report(c)
        sass = u["sass"]
        out[f"{name}-s{stages}"] = {
            "stack": u["stack"], "loop_local": loop_local_memory(sass), "smem": c.metadata.shared,
            "warps": c.metadata.num_warps, "qgmma": sass.count("QGMMA"), "setmaxnreg": sass.count("USETMAXREG"),
            "tma_stores": sass.count("UTMASTG"), "limit": W._smem_bytes(128, stages, 2)}
print(json.dumps(out))
'''


@pytest.mark.skipif(not nvidia_compiler_available() or ws_fp8_wgrad.gluon is None,
                    reason="needs Triton's NVIDIA backend with Gluon")
@pytest.mark.parametrize("ptxas", PTXAS)
def test_ws_fp8_wgrad_compiles_for_sm90(ptxas):
    """12 warps (two consumer warp groups and the producer's), the registers reallocated, four
    k32 FP8 wgmma a block in each consumer's five places (the pair's two, the odd block's, the
    two shared blocks'), one TMA store a consumer, shared memory within the SM's and the bound
    ``applies`` checks; no local memory in the wgmma loop (the triton 3.8 build keeps a 16-byte
    stack of per-tile values outside it)."""
    usage = run_compile_script(_SM90, ptxas=ptxas)
    assert len(usage) == 4
    for name, u in usage.items():
        assert u["stack"] <= 16 and u["loop_local"] == 0, (name, u)
        assert u["warps"] == 12 and u["setmaxnreg"] > 0 and u["tma_stores"] == 2, (name, u)
        assert u["qgmma"] == 2 * 5 * 4, (name, u)
        assert u["smem"] <= min(u["limit"], 227 * 1024), (name, u)


# --- Hopper only ---------------------------------------------------------------------------

@pytest.mark.skipif(not HOPPER, reason="needs a Hopper GPU (wgmma) and Gluon")
@pytest.mark.parametrize("counts,N,M", [
    ([300, 0, 211, 17], 256, 384),         # blocks shared between experts, an empty expert
    ([128, 256, 384], 128, 128),           # whole blocks only
    ([1, 63, 65, 0, 640], 384, 256),       # experts inside one block, an odd block count
    ([0, 0, 513, 0], 256, 128),            # one expert with a tail
    ([130, 10, 500], 128, 256),            # an expert inside a shared block's middle
])
@pytest.mark.parametrize("stages", [5, 3, 2])
@pytest.mark.parametrize("programs", [None, 1, 3])
def test_ws_fp8_wgrad_is_bitwise_grouped_wgrad_kernel(counts, N, M, stages, programs):
    qa, qb, c, T = _copies(counts, N, M, "cuda", seed=sum(counts) + N)
    want = _triton(qa, qb, c, T, (len(counts), N, M))
    got = torch.full_like(want, float("nan"))
    assert ws_fp8_wgrad.launch(qa, qb, got, c, stages=stages, programs=programs)
    assert torch.equal(got.view(torch.int16), want.view(torch.int16))
    # float64 of the dequantized copies (code x the scale of its 128-token block), each expert's
    # own tokens
    da, db = _dequantized(qa), _dequantized(qb)
    ref, s = [], 0
    for n in counts:
        ref.append(da[:, s:s + n] @ db[:, s:s + n].t())
        s += n
    assert normwise_rel_error(got, torch.stack(ref)) < 2 * torch.finfo(torch.bfloat16).eps


def _dequantized(q):
    """float64 (rows, Tp) values of a column-wise copy."""
    return q.data.view(torch.float8_e4m3fn).double() * q.scales.t().double().repeat_interleave(128, dim=1)


@pytest.mark.skipif(not HOPPER, reason="needs a Hopper GPU (wgmma) and Gluon")
def test_ws_fp8_wgrad_writes_float16_and_zeros_for_experts_without_tokens():
    counts = [0, 200, 0, 57]
    qa, qb, c, T = _copies(counts, 128, 256, "cuda", seed=7, dtype=torch.float16)
    want = _triton(qa, qb, c, T, (4, 128, 256), torch.float16)
    got = torch.full_like(want, float("nan"))
    assert ws_fp8_wgrad.launch(qa, qb, got, c, programs=2)
    assert torch.equal(got.view(torch.int16), want.view(torch.int16))
    assert not got[0].any() and not got[2].any()
