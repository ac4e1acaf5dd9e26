"""grouped_glu_mlp's 16-bit weight gradients warp-specialised in Gluon (ws_wgrad.py) and the
tuned route that runs them (GemmConfig.compose: the compose route with its two wgrads there).

The contract: a ``compose`` config runs the compose route, bit for bit its results, with the
wgrads through ws_wgrad_kernel where it runs (Hopper with Gluon; the sweep must see it launch)
and through torch._grouped_mm elsewhere. On the CPU these tests check the config, the
candidates and expected launches, the dispatch (launch counts, the same bits as the plain
compose route), the custom-op path under torch.compile and the sm_90 compile (no spills,
4 + 4 + 1 warps, 16 wgmma, the ring within shared memory); on a Hopper GPU the kernel against
torch._grouped_mm and grouped_wgrad_kernel (bitwise on every case measured) and against float64,
with experts ending inside a chunk, empty experts, partial column tiles and few persistent
programs, and CUDA-graph capture of the route.
"""

import dataclasses

import pytest
import torch
from test_grouped_compose import COMPOSE_LAUNCHES, FLOAT_NAMES, call_api, inputs

import tilefuse
from tilefuse import launches, tuning
from tilefuse.ops.grouped_glu_mlp import launch, ws_wgrad
from tilefuse.ops.grouped_glu_mlp import tune as gtune
from tilefuse.ops.grouped_glu_mlp.api import problem_for
from tilefuse.ops.grouped_glu_mlp.configs import GemmConfig, heuristic
from tilefuse.utils import normwise_rel_error

from sm90_helpers import PTXAS, nvidia_compiler_available, run_compile_script

pytestmark = pytest.mark.usefixtures("one_intra_op_thread")

HOPPER = torch.cuda.is_available() and ws_wgrad.available(torch.device("cuda"))
WIDE = GemmConfig(256, 128, 64, 4, 3, 1, compose=True)
NARROW = GemmConfig(128, 128, 64, 4, 5, 1, compose=True)
ROWS = GemmConfig(128, 128, 64, 4, 5, 1, compose=True, rows_block_n=128, rows_stages=5)   # + ws_rows
WIDE_ROWS = GemmConfig(256, 128, 64, 4, 3, 1, compose=True, rows_block_n=256, rows_stages=3)
ROWS_NOGLU = dataclasses.replace(ROWS, rows_glu=False)   # fc1, then the GLU kernel


def test_compose_config_is_checked_and_named():
    assert WIDE.name.endswith("-compose") and not heuristic("fwd", 2).name.endswith("-compose")
    with pytest.raises(TypeError, match="compose"):
        GemmConfig(256, 128, 64, 4, 3, 1, compose=1)
    for bad in (dict(block_m=64), dict(block_n=64), dict(block_k=128)):
        with pytest.raises(ValueError, match="compose"):
            GemmConfig(**{**dict(block_m=256, block_n=128, block_k=64), **bad}, compose=True)
    with pytest.raises(ValueError, match="compose"):
        GemmConfig(128, 128, 128, 8, 3, compose=True, ws=True)


def test_the_gluon_launches_take_only_counts_they_can_read(monkeypatch):
    """tokens_per_expert as the Gluon kernels read it (one count an expert at counts_ptr + e):
    (E,) contiguous. A strided or short counts makes ws_wgrad.prepare decline (the caller's
    other route runs), whatever the device (its check bypassed here: the rule is the host's)."""
    monkeypatch.setattr(ws_wgrad, "available", lambda device: True)
    counts = torch.tensor([5, 0, 11, 0, 0, 0], dtype=torch.int32)
    assert ws_wgrad.counts_ok(counts[:3], 3)
    assert not ws_wgrad.counts_ok(counts[::2], 3) and not ws_wgrad.counts_ok(counts[:2], 3)
    assert not ws_wgrad.counts_ok(counts[:3].view(1, 3), 3)
    a, b = torch.zeros(16, 128, dtype=torch.bfloat16), torch.zeros(16, 128, dtype=torch.bfloat16)
    c = torch.empty(3, 128, 128, dtype=torch.bfloat16)
    assert ws_wgrad.applies(a, b, c, 128, 3)
    assert ws_wgrad.prepare(a, b, c, counts[::2], block_m=128) is None
    assert ws_wgrad.prepare(a, b, c, counts[:2], block_m=128) is None
    # c's descriptor needs 16-byte rows and base: declined, not an assertion in its constructor
    wide = torch.zeros(16, 16, dtype=torch.bfloat16)
    assert not ws_wgrad.applies(a, wide[:, :12], torch.empty(3, 128, 12, dtype=torch.bfloat16), 128, 3)
    off = torch.empty(3 * 128 * 128 + 1, dtype=torch.bfloat16)[1:].view(3, 128, 128)
    assert not ws_wgrad.applies(a, b, off, 128, 3)
    assert ws_wgrad.prepare(a, b, off, counts[:3], block_m=128) is None


def test_the_rows_tile_is_checked_and_named():
    assert ROWS.name.endswith("-compose-rows128s5") and WIDE.name.endswith("-compose")
    with pytest.raises(TypeError, match="rows_block_n"):
        GemmConfig(256, 128, 64, 4, 3, 1, compose=True, rows_block_n=128.0, rows_stages=4)
    with pytest.raises(TypeError, match="rows_stages"):
        GemmConfig(256, 128, 64, 4, 3, 1, compose=True, rows_block_n=128, rows_stages=True)
    for bad in ((64, 4), (128, 1), (128, 0), (0, 3), (512, 3)):
        with pytest.raises(ValueError, match="rows_block_n"):
            GemmConfig(256, 128, 64, 4, 3, 1, compose=True, rows_block_n=bad[0], rows_stages=bad[1])
    with pytest.raises(ValueError, match="without compose"):
        GemmConfig(rows_block_n=128, rows_stages=4)
    # fc1's GLU out of the epilogue: a bool, on a rows tile only, named
    assert dataclasses.replace(ROWS, rows_glu=False).name.endswith("-compose-rows128s5-noglu")
    with pytest.raises(TypeError, match="rows_glu"):
        GemmConfig(256, 128, 64, 4, 3, 1, compose=True, rows_block_n=128, rows_stages=5, rows_glu=0)
    with pytest.raises(ValueError, match="rows_glu"):
        GemmConfig(256, 128, 64, 4, 3, 1, compose=True, rows_glu=False)


def test_the_compose_candidates_only_where_the_compose_route_is_the_baseline():
    bf16 = gtune.GroupedProblem.of(32768, 2048, 1408, 64, 2, "swiglu", 32, False)
    assert {WIDE, NARROW, ROWS, WIDE_ROWS, dataclasses.replace(ROWS, rows_glu=False)} <= set(
        gtune.candidates_for(bf16))
    assert gtune.FAMILY.is_valid(gtune.FAMILY.key(bf16), ROWS)
    assert gtune.FAMILY.is_valid(gtune.FAMILY.key(bf16), WIDE)
    assert not gtune.candidates_for(bf16)[0].compose   # the fused tiles stay first
    for other in (gtune.GroupedProblem.of(32768, 2048, 1408, 64, 2, "swiglu", 32, False, "fp8_block"),
                  gtune.GroupedProblem.of(4096, 256, 128, 8, 4, "swiglu", 32, False),     # fp32: not 16-bit
                  gtune.GroupedProblem.of(4096, 12, 128, 8, 2, "swiglu", 32, False)):     # 24-byte rows: unfused
        assert not any(c.compose for c in gtune.candidates_for(other)), other


def test_the_sweep_expects_the_gluon_wgrads_only_where_they_run(monkeypatch):
    bf16 = gtune.GroupedProblem.of(32768, 2048, 1408, 64, 2, "swiglu", 32, False)
    monkeypatch.setattr(gtune, "_ws_runs_here", lambda: False)
    assert gtune.FAMILY.expected_launches(bf16, WIDE) == COMPOSE_LAUNCHES
    monkeypatch.setattr(gtune, "_ws_runs_here", lambda: True)
    assert gtune.FAMILY.expected_launches(bf16, WIDE) == (*COMPOSE_LAUNCHES, "grouped_ws_wgrad")
    # a rows tile with the GLU in fc1's epilogue where the layout fits it (interleave 32 of 64 and
    # 128 columns a tile; the halves layout where F is a multiple of half the tile), else without
    rows = (*COMPOSE_LAUNCHES, "grouped_ws_wgrad", "grouped_ws_rows")
    assert gtune.FAMILY.expected_launches(bf16, ROWS) == (*rows, "grouped_ws_rows_glu")
    assert gtune.FAMILY.expected_launches(bf16, dataclasses.replace(ROWS, rows_glu=False)) == rows
    halves = dataclasses.replace(bf16, interleave=0)           # F 1408: a multiple of 128
    assert gtune.FAMILY.expected_launches(halves, ROWS) == (*rows, "grouped_ws_rows_glu")
    assert gtune.FAMILY.expected_launches(halves, WIDE_ROWS) == (*rows, "grouped_ws_rows_glu")
    halves = dataclasses.replace(halves, ffn=1344)              # a multiple of 64, not of 128
    assert gtune.FAMILY.expected_launches(halves, ROWS) == (*rows, "grouped_ws_rows_glu")
    assert gtune.FAMILY.expected_launches(halves, WIDE_ROWS) == rows
    assert gtune.FAMILY.expected_launches(dataclasses.replace(bf16, interleave=8), WIDE_ROWS) == (
        *rows, "grouped_ws_rows_glu")
    monkeypatch.setattr(gtune, "_ws_runs_here", lambda: False)
    assert gtune.FAMILY.expected_launches(bf16, ROWS) == COMPOSE_LAUNCHES


@pytest.mark.parametrize("interleave", [32, None])
@pytest.mark.parametrize("config", [WIDE, NARROW, ROWS, WIDE_ROWS, ROWS_NOGLU], ids=lambda c: c.name)
def test_a_compose_config_runs_the_compose_route_with_the_same_bits(tuning_table, device, config, interleave):
    """A table entry with ``compose`` runs the compose route (not the fused kernels), its wgrads
    (and with a rows tile its fc1, fc2 and dgrads: 4 GEMMs, fc1 with the GLU in its epilogue,
    interleaved or in the halves layout, unless rows_glu is off) in Gluon where the kernels run,
    and gives the plain compose route's bits, interleaved and in the halves layout."""
    i = inputs([70, 0, 45, 13], 128, 128, torch.bfloat16, True, device, seed=3)
    with tilefuse.level(2):
        want, plain = call_api(i, "swiglu", interleave)
        tuning.register("grouped_glu_mlp", {problem_for(i["x"], i["w2"], "swiglu", interleave, True): config})
        got, launched = call_api(i, "swiglu", interleave)
    assert [launched[k] for k in COMPOSE_LAUNCHES] == [1, 1] and not launched["grouped_mlp_fwd"]
    assert launched["grouped_ws_wgrad"] == (2 if HOPPER else 0) and not plain["grouped_ws_wgrad"]
    assert launched["grouped_ws_rows"] == (4 if HOPPER and config.rows_block_n else 0) and not plain["grouped_ws_rows"]
    # the GLU in fc1's epilogue: interleave 32, or the halves layout where F (128) is a
    # multiple of half the tile
    assert launched["grouped_ws_rows_glu"] == (1 if HOPPER and config.rows_block_n and config.rows_glu
                                               and (interleave or 128 % (config.rows_block_n // 2) == 0) else 0)
    for name, a, b in zip(("y", *FLOAT_NAMES), want, got):
        assert torch.equal(a, b), name


@pytest.mark.parametrize("interleave", [8, None])
@pytest.mark.parametrize("config", [WIDE, ROWS, ROWS_NOGLU], ids=lambda c: c.name)
def test_a_compose_config_under_torch_compile(tuning_table, device, config, interleave):
    """fullgraph compile of the public call with a compose entry: the compose custom ops carry
    the Gluon tiles (and the halves layout as interleave 0), and y and every gradient equal the
    eager call's bitwise."""
    i = inputs([9, 0, 14], 64, 64, torch.bfloat16, False, device, seed=4)
    counts = i["counts"]
    tuning.register("grouped_glu_mlp", {problem_for(i["x"], i["w2"], "swiglu", interleave, False): config})

    def f(x, p, w1, w2):
        return tilefuse.grouped_glu_mlp(x, counts, p, w1, w2, glu_interleave=interleave)

    with tilefuse.level(2):
        want, _ = call_api(i, "swiglu", interleave)
        leaves = [i[k].detach().requires_grad_(True) for k in ("x", "probs", "w1", "w2")]
        torch._dynamo.reset()
        y = torch.compile(f, fullgraph=True, backend="aot_eager" if device == "cpu" else "inductor")(*leaves)
        got = (y, *torch.autograd.grad(y, leaves, i["dy"]))
    for a, b in zip(want, got):
        assert torch.equal(a, b)


def test_applies_only_where_the_kernel_runs(device):
    a = torch.randn(300, 256, device=device).bfloat16()
    b = torch.randn(300, 384, device=device).bfloat16()
    c = torch.empty(3, 256, 384, dtype=torch.bfloat16, device=device)
    counts = torch.tensor([100, 0, 200], dtype=torch.int32, device=device)
    assert ws_wgrad.launch(a, b, c, counts) == HOPPER
    if HOPPER:   # the layout contract, the device being fine
        assert ws_wgrad.applies(a, b, c, 256, 3) and ws_wgrad.applies(a, b, c, 128, 4)
        assert not ws_wgrad.applies(a, b, c, 64, 3)                         # not a kernel tile
        assert not ws_wgrad.applies(a, b, c, 256, 4)                        # ring and buffers do not fit
        assert ws_wgrad.applies(a, b, c, 128, 6) and not ws_wgrad.applies(a, b, c, 128, 7)
        assert not ws_wgrad.applies(a, b, c, 256, 1)
        assert not ws_wgrad.applies(a.float(), b.float(), c.float(), 256, 3)   # 16-bit only
        assert not ws_wgrad.applies(a, b.half(), c, 256, 3)                 # one dtype
        assert not ws_wgrad.applies(a[:, :200], b, c[:, :200], 256, 3)      # N not a multiple of 128
        assert not ws_wgrad.applies(a[:0], b[:0], c, 256, 3)                # no rows
        assert not ws_wgrad.applies(a, b, c.transpose(1, 2).contiguous().transpose(1, 2), 256, 3)


_SM90 = r'''
import json
import triton
from sm90_helpers import cubin_report
from triton.backends.compiler import GPUTarget
from triton.experimental.gluon import language as gl
from triton.experimental.gluon._runtime import GluonASTSource
from tilefuse.ops.grouped_glu_mlp import ws_wgrad as W

out = {}
for block_m, stages in ((256, 3), (256, 2), (128, 5), (128, 4)):
    for dtype, name in ((gl.bfloat16, "bf16"), (gl.float16, "fp16")):
        def desc(shape):
            return "tensordesc<%s[%d, %d],%s>" % (name, shape[0], shape[1],
                                                  gl.NVMMASharedLayout.get_default_for(shape, dtype))
        sig = {"a_desc": desc([W.BLOCK_K, W.BLOCK_N]), "b_desc": desc([W.BLOCK_K, block_m]),
               "c_desc": desc([W.BLOCK_N // 2, block_m]), "counts_ptr": "*i32", "N": "i32", "M": "i32",
               "n_tiles": "i32"}
        ce = dict(BLOCK_N=W.BLOCK_N, BLOCK_M=block_m, BLOCK_K=W.BLOCK_K, STAGES=stages,
                  CONSUMER_REGS=W.CONSUMER_REGS, PRODUCER_REGS=W.PRODUCER_REGS)
        src = GluonASTSource(W.ws_wgrad_kernel, {**sig, **{k: "constexpr" for k in ce}}, constexprs=ce)
        c = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4, "maxnreg": W.MAXNREG})
        u = cubin_report(c)
        sass = u["sass"]
        out[f"{name}-m{block_m}-s{stages}"] = {
            "stack": u["stack"], "smem": c.metadata.shared, "warps": c.metadata.num_warps,
            "hgmma": sass.count("HGMMA"), "setmaxnreg": sass.count("USETMAXREG"), "tma_stores": sass.count("UTMASTG"),
            "limit": W._smem_bytes(block_m, stages)}
print(json.dumps(out))
'''


@pytest.mark.skipif(not nvidia_compiler_available() or ws_wgrad.gluon is None,
                    reason="needs Triton's NVIDIA backend with Gluon")
@pytest.mark.parametrize("ptxas", PTXAS)
def test_ws_wgrad_compiles_for_sm90_without_spills(ptxas):
    """The candidates' tiles and others, bf16 and fp16: no stack, 12 warps (two consumer warp
    groups and the producer's), the registers reallocated, four k16 wgmma a chunk in each of the
    two consumers' two loops (shared and register A), one TMA store a consumer, and shared
    memory within both the SM's 227 KB and the bound ``applies`` checks."""
    usage = run_compile_script(_SM90, ptxas=ptxas)
    assert len(usage) == 8
    for name, u in usage.items():
        assert u["stack"] == 0 and u["warps"] == 12 and u["setmaxnreg"] > 0, (name, u)
        assert u["hgmma"] == 2 * 2 * 4 and u["tma_stores"] == 2, (name, u)
        assert u["smem"] <= min(u["limit"], 227 * 1024), (name, u)


# --- Hopper only ---------------------------------------------------------------------------

def _reference(a, b, counts):
    out, s = [], 0
    for c in counts:
        out.append(a[s:s + c].double().t() @ b[s:s + c].double())
        s += c
    return torch.stack(out)


@pytest.mark.skipif(not HOPPER, reason="needs a Hopper GPU (wgmma) and Gluon")
@pytest.mark.parametrize("counts,N,M", [([300, 0, 211, 17], 256, 384), ([64, 128, 192], 128, 128),
                                        ([1, 63, 65, 0, 640], 384, 256), ([0, 0, 513, 0], 256, 320),
                                        ([5, 7, 90, 20], 128, 128)])
@pytest.mark.parametrize("tile", [(256, 3), (256, 2), (128, 5)])
@pytest.mark.parametrize("programs", [None, 1, 3])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_ws_wgrad_is_bitwise_grouped_mm(counts, N, M, tile, programs, dtype):
    """Against grouped_wgrad_kernel at the 16-bit heuristic tile and, for bf16, torch._grouped_mm
    (CUTLASS, the compose route's wgrad): the same bits (each chains the products chunk after
    chunk in token order); fp16's _grouped_mm is torch's per-group loop, another summation, so
    there only close. And within a rounding of float64."""
    g = torch.Generator().manual_seed(sum(counts) + N)
    T = sum(counts)
    a = torch.randn(T, N, generator=g).to(dtype).cuda()
    b = torch.randn(T, M, generator=g).to(dtype).cuda()
    c = torch.tensor(counts, dtype=torch.int32, device="cuda")
    got = torch.full((len(counts), N, M), float("nan"), dtype=dtype, device="cuda")
    assert ws_wgrad.launch(a, b, got, c, block_m=tile[0], stages=tile[1], programs=programs)
    want = torch._grouped_mm(a.t(), b, offs=torch.cumsum(c, 0).to(torch.int32))
    triton_out = torch.empty_like(got)
    launch._wgrad(a, b, triton_out, c, T, heuristic("wgrad", 2), None)
    bits = torch.int16
    assert torch.equal(got.view(bits), triton_out.view(bits))
    if dtype == torch.bfloat16:
        assert torch.equal(got.view(bits), want.view(bits))
    else:
        assert normwise_rel_error(got, want) < 2 * torch.finfo(dtype).eps
    assert normwise_rel_error(got, _reference(a, b, counts)) < 2 * torch.finfo(dtype).eps


@pytest.mark.skipif(not HOPPER, reason="needs a Hopper GPU (wgmma) and Gluon")
def test_ws_wgrad_without_rows_falls_back():
    a = torch.empty(0, 128, dtype=torch.bfloat16, device="cuda")
    c = torch.empty(2, 128, 128, dtype=torch.bfloat16, device="cuda")
    assert not ws_wgrad.launch(a, a, c, torch.zeros(2, dtype=torch.int32, device="cuda"))


@pytest.mark.skipif(not HOPPER, reason="needs a Hopper GPU (wgmma) and Gluon")
def test_a_compose_config_captures_in_a_cuda_graph(tuning_table):
    """The public call with a compose entry, forward and backward, captured in a CUDA graph:
    the Gluon wgrads launch in it and the replay gives the eager call's bits."""
    from gpu_helpers import assert_graph_replay_matches_eager
    i = inputs([300, 0, 211, 17], 256, 128, torch.bfloat16, False, "cuda", seed=7)
    tuning.register("grouped_glu_mlp", {problem_for(i["x"], i["w2"], "swiglu", 32, False): WIDE})

    def step():
        leaves = [i[k].detach().requires_grad_(True) for k in ("x", "probs", "w1", "w2")]
        y = tilefuse.grouped_glu_mlp(leaves[0], i["counts"], *leaves[1:], glu_interleave=32)
        return (y, *torch.autograd.grad(y, leaves, i["dy"]))

    with tilefuse.level(2), launches.counting() as launched:
        assert_graph_replay_matches_eager(step)
    assert launched["grouped_ws_wgrad"] >= 4   # eagerly and while captured


class _KeyLog:
    """A SpecializingLauncher stand-in recording the keys DescriptorLaunch launches by."""

    def __init__(self):
        self.held, self.keys = set(), []

    def launch_held(self, key, grid, args, consts):
        self.keys.append(("held", key))
        return key in self.held

    def launch_keyed(self, key, grid, args, consts):
        self.keys.append(("keyed", key))
        self.held.add(key)


@pytest.mark.skipif(ws_wgrad.gluon is None, reason="needs Gluon (its descriptors)")
def test_descriptor_launch_keys_on_what_specializes_the_kernel():
    """ws_wgrad.DescriptorLaunch (every ws_rows / ws_wgrad launch) looks the compiled kernel up
    by the arguments' specialization fixed at construction (the integers', the descriptors',
    the tensors' dtypes) and the tensors' alignment per call: a tensor of another dtype or
    alignment, or another integer specialization, is another key (a kernel compiled for one
    never runs the other); equal metadata share one. A misaligned descriptor base launches
    nothing."""
    log = _KeyLog()
    buf = torch.zeros(4096 + 8, dtype=torch.bfloat16)
    a = buf[:128 * 32].view(128, 32)
    counts = torch.zeros(4, dtype=torch.int32)
    probs16, probs32 = torch.zeros(64, dtype=torch.bfloat16), torch.zeros(64)

    def make(rest, base=a):
        return ws_wgrad.DescriptorLaunch(log, (1,), (base,), ([64, 32],), rest, ("c",))
    first = make((counts, probs16, 48))
    assert first((a,), (counts, probs16, 48)) and first((a,), (counts, probs16, 48))
    assert [k[0] for k in log.keys] == ["held", "keyed", "held"]
    key = log.keys[-1][1]
    same = make((counts.clone(), probs16.clone(), 48))
    assert same((a,), (counts, probs16, 48)) and log.keys[-1] == ("held", key)
    keys = {key}
    for launcher, rest in ((make((counts, probs32, 48)), (counts, probs32, 48)),          # dtype
                           (first, (counts, buf[1:65], 48)),                              # alignment
                           (make((counts, probs16, 40)), (counts, probs16, 40)),          # int % 16
                           (make((counts, probs16, 1)), (counts, probs16, 1))):           # int == 1
        assert launcher((a,), rest)
        keys.add(log.keys[-1][1])
    assert len(keys) == 5
    n = len(log.keys)
    assert not first((buf[1:1 + 128 * 32].view(128, 32),), (counts, probs16, 48)) and len(log.keys) == n
