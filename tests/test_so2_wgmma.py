"""so2_mixing_stack's level-3 layer GEMMs in Gluon (So2Config.wgmma, wgmma_kernels.py).

The contract: a wgmma config gives so2_gemm_kernel's 3xfp16 result bit for bit, on Hopper
through so2_gemm3x_wgmma_kernel and elsewhere (the CPU, other GPUs, layouts outside the
descriptors' contract) through so2_gemm_kernel itself. On the CPU these tests check the config
space, the dispatch and its fallback, and the sm_90 compile (no spills, one wgmma wait a K
tile); on a Hopper GPU the kernel itself against so2_gemm_kernel in every mode.
"""

import pytest
import torch

from tilefuse import launches
from tilefuse.ops.so2_mixing_stack import configs, kernels, launch, wgmma_kernels
from tilefuse.ops.so2_mixing_stack import tune as so2_tune
from tilefuse.ops.so2_mixing_stack.configs import FP16X3, FP16X3_GATE, TF32X3, So2Config
from tilefuse.ops.so2_mixing_stack.reference import So2Dims

from sm90_helpers import PTXAS, nvidia_compiler_available, run_compile_script
from test_so2_kernels import make

HOPPER = torch.cuda.is_available() and wgmma_kernels.available(torch.device("cuda"))
WGMMA = So2Config(64, 64, 16, 4, 2, precision=FP16X3, wgmma=True)


def test_wgmma_is_a_variant_of_the_relays_3xfp16_gemms():
    assert WGMMA.name == "relay-M64-N64-K16-w4-s2-3xfp16-wgmma" and WGMMA.route == "relay"
    assert So2Config(64, 64, 16, 4, 2, precision=FP16X3_GATE, wgmma=True).name.endswith("-3xfp16-gate-wgmma")
    assert WGMMA.relay() == WGMMA
    for bad in (dict(), dict(precision=TF32X3), dict(precision=FP16X3, fused=True),
                dict(precision=FP16X3, fused=True, sigma_pass=True)):
        with pytest.raises(ValueError, match="wgmma"):
            So2Config(64, 64, 16, 4, 2, wgmma=True, **bad)
    # num_stages is the weight ring's depth: 2 to WGMMA_MAX_STAGES slots
    for stages in (2, configs.WGMMA_MAX_STAGES):
        assert So2Config(64, 64, 16, 4, stages, precision=FP16X3, wgmma=True).num_stages == stages
    for stages in (1, configs.WGMMA_MAX_STAGES + 1):
        with pytest.raises(ValueError, match="weight ring"):
            So2Config(64, 64, 16, 4, stages, precision=FP16X3, wgmma=True)


def test_level3_candidates_hold_the_wgmma_tiles_where_block_k_fits():
    for lmax, cf in ((3, 32), (2, 64), (1, 16)):
        got = {(c.block_m, c.block_n, c.num_warps, c.num_stages, c.precision)
               for c in configs.level3_candidates(lmax, cf) if c.wgmma}
        assert got == {(*t, p) for t in configs.WGMMA_TILES for p in (FP16X3, FP16X3_GATE)}
        assert all(c.block_k == cf for c in configs.level3_candidates(lmax, cf) if c.wgmma)
    for cf in (48, 24):   # BLOCK_K 32 is not the focus dim: no K tile per sub-tile, no wgmma
        assert not any(c.wgmma for c in configs.level3_candidates(2, cf))
    fam = so2_tune.FAMILY
    wg = next(c for c in configs.level3_candidates(3, 32) if c.wgmma)
    assert fam.is_valid("L3-C32-x4-l3", wg) and not fam.is_valid("L3-C32-x4", wg)
    assert fam.config_from_dict(fam.config_to_dict(wg)) == wg


def test_the_sweep_expects_the_gluon_launch_only_where_it_runs(monkeypatch):
    fam, p = so2_tune.FAMILY, so2_tune.FAMILY.problem_for_key("L3-C32-x4-l3")
    wg = next(c for c in configs.level3_candidates(3, 32) if c.wgmma)
    monkeypatch.setattr(so2_tune, "_wgmma_runs_here", lambda: True)
    assert "so2_gemm3x_wgmma" in fam.expected_launches(p, wg)
    assert "so2_gemm3x_wgmma" not in fam.expected_launches(p, So2Config(64, 64, 32, 4, 2, precision=FP16X3))
    monkeypatch.setattr(so2_tune, "_wgmma_runs_here", lambda: False)
    assert "so2_gemm3x_wgmma" not in fam.expected_launches(p, wg)


def test_wgmma_applies_only_to_its_layout(monkeypatch):
    a = torch.zeros(1, 8, 48)
    w = torch.zeros(1, 32, 32, dtype=torch.float16)
    cfg = So2Config(64, 64, 16, 4, 2, precision=FP16X3, wgmma=True)
    assert not wgmma_kernels.available(a.device)          # the CPU never
    assert not launch.wgmma_applies(a, w, a, cfg, 32)
    monkeypatch.setattr(wgmma_kernels, "available", lambda device: True)
    assert launch.wgmma_applies(a, w, a, cfg, 32)
    assert not launch.wgmma_applies(a, w, a, cfg, 40)                         # K_LEN not a multiple of BLOCK_K
    assert not launch.wgmma_applies(a.double(), w, a, cfg, 32)                # not float32 activations
    assert not launch.wgmma_applies(a, w.float(), a, cfg, 32)                 # not float16 weights
    assert not launch.wgmma_applies(a, w, a, So2Config(32, 64, 16, 4, 2, precision=FP16X3, wgmma=True), 32)
    assert not launch.wgmma_applies(a, w, a, So2Config(64, 64, 24, 4, 2, precision=FP16X3, wgmma=True), 48)


@pytest.mark.skipif(wgmma_kernels.gluon is None, reason="this Triton has no Gluon Hopper API")
def test_descriptors_refuse_weights_outside_the_contract():
    w = torch.zeros(2, 32, 64, dtype=torch.float16)
    assert wgmma_kernels.descriptors(w, w.clone(), 16, 64) is not None
    assert wgmma_kernels.descriptors(w.transpose(1, 2), w.transpose(1, 2), 16, 64) is None   # not contiguous
    assert wgmma_kernels.descriptors(w.float(), w.float(), 16, 64) is None                    # not float16
    odd = torch.zeros(2, 32, 36, dtype=torch.float16)                                        # 72-byte rows
    assert wgmma_kernels.descriptors(odd, odd.clone(), 16, 64) is None


@pytest.mark.skipif(wgmma_kernels.gluon is None, reason="this Triton has no Gluon Hopper API")
def test_activation_descriptor_refuses_activations_outside_the_contract():
    a = torch.zeros(2, 100, 48)
    focus_major = wgmma_kernels.activation_descriptor(a, False, 64, 16)
    edge_major = wgmma_kernels.activation_descriptor(a, True, 64, 16)
    assert list(focus_major.shape) == [200, 48] and list(edge_major.shape) == [2, 4800]
    assert list(focus_major.block_shape) == [64, 16]
    misaligned = torch.zeros(2 * 100 * 48 + 1)[1:].view(2, 100, 48)                         # base 4 bytes off
    assert wgmma_kernels.activation_descriptor(misaligned, False, 64, 16) is None
    assert wgmma_kernels.activation_descriptor(a.transpose(0, 1), False, 64, 16) is None    # not contiguous
    assert wgmma_kernels.activation_descriptor(a.double(), False, 64, 16) is None           # not float32
    assert wgmma_kernels.activation_descriptor(torch.zeros(2, 10, 18), False, 64, 16) is None   # 72-byte rows
    assert wgmma_kernels.activation_descriptor(a[0], False, 64, 16) is None                 # not (F, E, ROW)


def _stack(device, cfg, edges=37, seed=0):
    """Forward + backward (grad_u0, grad_alpha) of the stack at lmax 1, Cf 16 with ``cfg``,
    and the launches it made."""
    d, (u0, alpha, w0, w1, gw) = make(1, 2, 16, edges, device, seed=seed, grad=False)
    grad_out = torch.randn(edges, 2, d.row, generator=torch.Generator().manual_seed(seed + 1)).to(device)
    with launches.counting() as seen:
        x_local, z_all, u_final = launch.forward(u0, alpha, w0, w1, gw, d, True, config=cfg)
        grad_u0, grad_alpha, _ = launch.backward(grad_out, x_local, z_all, u_final, alpha, w0, w1, gw, d, True,
                                                 False, config=cfg)
    return (x_local, z_all, u_final, grad_u0, grad_alpha), seen


@pytest.mark.parametrize("precision", [FP16X3, FP16X3_GATE])
def test_a_wgmma_config_gives_the_triton_kernels_bits(device, precision):
    """On the CPU (and any non-Hopper device) through so2_gemm_kernel, launching no Gluon; on
    Hopper through so2_gemm3x_wgmma_kernel: the same outputs bit for bit either way."""
    plain = So2Config(64, 64, 16, 4, 2, precision=precision)
    wg = So2Config(64, 64, 16, 4, 2, precision=precision, wgmma=True)
    want, seen_plain = _stack(device, plain)
    got, seen = _stack(device, wg)
    for a, b in zip(got, want):
        assert torch.equal(a, b)
    assert not seen_plain["so2_gemm3x_wgmma"]
    assert (seen["so2_gemm3x_wgmma"] > 0) == HOPPER


_SM90_WGMMA = r'''
import json
import triton
from sm90_helpers import cubin_report, loop_local_memory
from triton.backends.compiler import GPUTarget
from triton.experimental.gluon import language as gl
from triton.experimental.gluon._runtime import GluonASTSource
from tilefuse.ops.so2_mixing_stack import kernels as K
from tilefuse.ops.so2_mixing_stack import wgmma_kernels as W
from tilefuse.ops.so2_mixing_stack.configs import WGMMA_TILES

out = {}
ints = ["F", "E", "ROW", "K_START", "K_LEN", "N_START", "N_LEN", "CF", "LG", "w_rows", "w_stride_k"]
cases = [(cf, tile, mode) for tile in WGMMA_TILES for mode in (K.FWD_GATED, K.FINAL, K.BWD, K.BWD_HEAD)
         for cf in (32,)] + [(64, tile, K.BWD) for tile in WGMMA_TILES]
cases += [(cf, (64, 64, 4, stages), K.BWD) for cf in (32, 64) for stages in (3, 4)]   # deeper weight rings
for cf, (bm, bn, warps, stages), mode in cases:
    lay = gl.NVMMASharedLayout.get_default_for([cf, bn], gl.float16)
    desc = "tensordesc<fp16[%d, %d],%s>" % (cf, bn, lay)
    adesc = "tensordesc<fp32[%d, %d],%s>" % (bm, cf, gl.NVMMASharedLayout.get_default_for([bm, cf], gl.float32))
    sig = {"ad": adesc, "wd": desc, "wlod": desc, "wscale_ptr": "*fp32", "res_ptr": "*fp32", "out_ptr": "*fp32",
           "z_ptr": "*fp32", "sigma_ptr": "*fp32", "alpha_ptr": "*fp32", **{n: "i32" for n in ints}}
    ce = dict(MODE=mode, APPLY_ALPHA=True, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=cf, num_warps=warps, W_STAGES=stages)
    src = GluonASTSource(W.so2_gemm3x_wgmma_kernel, {**sig, **{k: "constexpr" for k in ce}}, constexprs=ce)
    c = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": warps})
    u = cubin_report(c)
    sass = u["sass"]
    out[f"Cf{cf}-M{bm}-N{bn}-w{warps}-s{stages}-mode{mode}"] = {
        "regs": u["regs"], "stack": u["stack"], "wgmma": c.asm["ptx"].count("wgmma.mma_async"),
        "waits": sass.count("WARPGROUP.DEPBAR"), "arrives": sass.count("WARPGROUP.ARRIVE"),
        "loop_local": loop_local_memory(sass)}
print(json.dumps(out))
'''


@pytest.mark.skipif(not nvidia_compiler_available() or wgmma_kernels.gluon is None,
                    reason="needs Triton's NVIDIA backend with Gluon")
@pytest.mark.parametrize("ptxas", PTXAS)
def test_wgmma_kernel_compiles_for_sm90_without_spills_and_waits_once_a_k_tile(ptxas):
    """Every WGMMA_TILES tile, each mode at Cf 32 and the backward at Cf 64, and 64x64 with weight
    rings of 3 and 4 slots: no spill in the K loop, the three products of a K tile (wgmma
    instructions of k16 each) and ONE wait in the SASS. ptxas serialises a wgmma chain (a wait
    after each: C7514 / C7515) when other instructions touch its accumulator while it runs,
    which is what this kernel exists to avoid.

    Under Triton's ptxas (the tuning table's measurements) no stack at all. Under torch's (CUDA
    13.0 in torch 2.11+cu130) the 64x128 tile's BWD_HEAD at Cf 32 spills 24 bytes after its
    loop, in the epilogue, once a tile; loading alpha a chunk there removed it and cost the
    shipped level-3 entries 0.3-0.7% under either ptxas (benchmarks/results/2026-12-04-h200-ah
    run 2), so the kernel keeps the load before the chunk loop."""
    usage = run_compile_script(_SM90_WGMMA, ptxas=ptxas)
    assert len(usage) == 4 * 4 + 4 + 4
    for name, u in usage.items():
        cf = int(name.split("-")[0][2:])
        assert u["loop_local"] == 0, (name, u)
        if ptxas == "triton":
            assert u["stack"] == 0, (name, u)
        assert u["waits"] == 1, (name, u)
        assert u["wgmma"] == 3 * (cf // 16), (name, u)


# --- Hopper only ---------------------------------------------------------------------------

def _segment_inputs(mode, lmax, cf, edges, seed):
    """(a, res, out, z, sigma, alpha, weights (heads, tails, inverse scales), segment kwargs, d)
    for one layer GEMM of ``mode`` on the m = 1 segment (N_LEN = 2 lmax Cf: a partial column
    tile at BLOCK_N 128 for lmax 3)."""
    d = So2Dims(lmax, cf)
    g = torch.Generator(device="cuda").manual_seed(seed)
    F = 2
    shape = (edges, F, d.row) if mode == kernels.BWD_HEAD else (F, edges, d.row)
    a = torch.randn(shape, generator=g, device="cuda") * 3
    res = a if mode == kernels.BWD_HEAD else torch.randn(F, edges, d.row, generator=g, device="cuda")
    w = torch.randn(1, F, d.m1, d.m1, generator=g, device="cuda") * d.m1 ** -0.5
    weights = launch._layer(launch.split_fp16(w), 0)
    sigma = torch.rand(F, edges, d.lg, generator=g, device="cuda")
    alpha = torch.rand(edges, F, generator=g, device="cuda") + 0.2
    seg = dict(k_start=d.m0, k_len=d.m1, n_start=d.m0, n_len=d.m1)
    return d, a, res, sigma, alpha, weights, seg


# Weight rings deeper than the candidates' two slots (So2Config.num_stages of a wgmma config).
DEEP_RINGS = ((64, 64, 4, 3), (64, 64, 4, 4), (64, 128, 4, 4))


@pytest.mark.skipif(not HOPPER, reason="needs a Hopper GPU (wgmma) and Gluon")
@pytest.mark.parametrize("tile", configs.WGMMA_TILES + DEEP_RINGS)
@pytest.mark.parametrize("mode", ["FWD_GATED", "FINAL", "BWD", "BWD_HEAD"])
@pytest.mark.parametrize("apply_alpha", [True, False])
def test_wgmma_kernel_is_bitwise_so2_gemm_kernel(tile, mode, apply_alpha):
    block_m, block_n, warps, stages = tile
    m = getattr(kernels, mode)
    for lmax, cf, edges in ((3, 32, 1000), (2, 64, 777)):   # partial row blocks; Cf 32 / 64 K tiles
        d, a, res, sigma, alpha, weights, seg = _segment_inputs(m, lmax, cf, edges, seed=lmax)
        outs = []
        for wgmma in (False, True):
            cfg = So2Config(block_m, block_n, cf, warps, stages, precision=FP16X3, wgmma=wgmma)
            out_shape = (edges, 2, d.row) if m == kernels.FINAL else (2, edges, d.row)
            out = torch.full(out_shape, float("nan"), device="cuda")
            z = torch.full((2, edges, d.row), float("nan"), device="cuda")
            with launches.counting() as seen:
                launch._gemm(m, a, weights, res, out, d, cfg, z=z, sigma=sigma, alpha=alpha, apply_alpha=apply_alpha,
                             **seg)
            assert bool(seen["so2_gemm3x_wgmma"]) == wgmma
            outs.append((out, z))
        (want, want_z), (got, got_z) = outs
        # bit patterns: the columns outside the segment keep their NaN fill in both
        assert torch.equal(got.view(torch.int32), want.view(torch.int32)), (lmax, cf)
        assert not torch.isnan(got[..., seg["n_start"]:seg["n_start"] + seg["n_len"]]).any()
        if m == kernels.FWD_GATED:
            assert torch.equal(got_z.view(torch.int32), want_z.view(torch.int32))


@pytest.mark.skipif(not HOPPER, reason="needs a Hopper GPU (wgmma) and Gluon")
def test_activations_outside_the_descriptor_contract_take_the_triton_kernel():
    """A misaligned activation base (no TMA descriptor) launches so2_gemm_kernel: the same bits."""
    d, a, res, sigma, alpha, weights, seg = _segment_inputs(kernels.BWD, 3, 32, 1000, seed=5)
    shifted = torch.empty(a.numel() + 1, device="cuda")[1:].view(a.shape)
    shifted.copy_(a)
    outs = []
    for act, wgmma in ((a, False), (shifted, True)):
        cfg = So2Config(64, 64, 32, 4, 2, precision=FP16X3, wgmma=wgmma)
        out = torch.full_like(res, float("nan"))
        with launches.counting() as seen:
            launch._gemm(kernels.BWD, act, weights, res, out, d, cfg, **seg)
        assert not seen["so2_gemm3x_wgmma"]
        outs.append(out)
    assert torch.equal(outs[0].view(torch.int32), outs[1].view(torch.int32))


@pytest.mark.skipif(not HOPPER, reason="needs a Hopper GPU (wgmma) and Gluon")
def test_wgmma_stack_at_production_tiles_is_bitwise_and_empty_edges_are_fine():
    for lmax, cf, tile in ((3, 32, (64, 64, 4, 2)), (6, 32, (64, 128, 4, 2)), (2, 64, (128, 128, 8, 2))):
        d, (u0, alpha, w0, w1, gw) = make(lmax, 2, cf, 3001, "cuda", grad=False)
        grad_out = torch.randn(3001, 2, d.row, device="cuda")
        runs = []
        for wgmma in (False, True):
            cfg = So2Config(*tile[:2], cf, *tile[2:], precision=FP16X3, wgmma=wgmma)
            fwd = launch.forward(u0, alpha, w0, w1, gw, d, True, config=cfg)
            runs.append((*fwd, *launch.backward(grad_out, *fwd, alpha, w0, w1, gw, d, True, True, config=cfg)[:2]))
        for a, b in zip(*runs):
            assert torch.equal(a, b)
    d, (u0, alpha, w0, w1, gw) = make(3, 2, 32, 0, "cuda", grad=False)
    x_local, _, _ = launch.forward(u0, alpha, w0, w1, gw, d, True, config=So2Config(64, 64, 32, 4, 2, precision=FP16X3,
                                                                                    wgmma=True))
    assert x_local.shape == (0, 2, d.row)
