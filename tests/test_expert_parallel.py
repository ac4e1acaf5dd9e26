"""ExpertParallelGLUMLP over torch.distributed (gloo on the CPU, kernels in Triton's interpreter;
NCCL on two GPUs): the expert-parallel module equals one GroupedGLUMLP holding all experts,
forward and every gradient (and a gradient penalty's, through a double backward), with uneven
splits, a rank receiving no tokens, experts with zero tokens and a rank with no tokens at all;
bad arguments name the argument (out-of-range expert
ids on one rank make every rank raise); ranks may differ in what changes no backward collective
(frozen experts on some ranks, requires_grad under no_grad); a module pickled on one rank and
loaded on another, or in a group of another size, makes every rank raise, and a state dict
loads only into the rank (and E, W) that saved it; setting the process group in use on one rank
changes nothing; ``tilefuse.tune`` leaves all ranks with the same table entries.

Each spawned group runs many cases (a spawn costs seconds: every process imports torch,
Triton and tilefuse), each rank writing its per-case outcome to a JSON file the tests read.

Reference: every rank builds the full module from one seed and the inputs of every rank; the
full module runs all ranks' tokens at once, sorted by expert (within an expert the tokens then
come in rank order, as they arrive at the expert's rank). Tolerances:
- fp32 without a recipe, elementwise: each side is within k eps32 * max|result| of the exact
  value with k = H + 2F + max(m_e) + 16 (test_grouped_mlp_reference.fp32_tolerance), so the two
  differ by at most twice that.
- otherwise normwise, the tuner's comparison of two paths of the op (GroupedFamily.compare:
  4 eps_x + 16 sqrt(K) eps32, plus an eighth of a quantization step with a recipe). The two modules'
  calls have different tuning keys (E/W experts and the rows a rank receives, against E and
  all rows), so on a GPU they may run different paths or tiles; each expert sees the same
  rows in the same order, so on the CPU (one path) they agree bitwise.
"""

from __future__ import annotations

import copy
import datetime
import functools
import json
import os
import sys
import time
import traceback
import warnings
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from test_grouped_mlp_reference import fp32_tolerance
from tuning_helpers import FakeTimer

import tilefuse
from tilefuse import tuning
from tilefuse.nn import ExpertParallelGLUMLP, GroupedGLUMLP
from tilefuse.ops.grouped_glu_mlp import op
from tilefuse.ops.grouped_glu_mlp.api import problem_for
from tilefuse.ops.grouped_glu_mlp.tune import FAMILY, GroupedProblem
from tilefuse.tuning import BASELINE, store, table

# Imported by the spawned ranks too (conftest's TRITON_INTERPRET reaches them by the environment).
HAS_CUDA = torch.cuda.is_available()
E2, H, F = 4, 16, 8      # two ranks: 2 experts each


def _case(name, n_experts, routes, hidden=H, ffn=F, dtype=torch.float32, **module):
    module.setdefault("glu_interleave", 4)
    return dict(name=name, n_experts=n_experts, routes=routes, hidden=hidden, ffn=ffn, dtype=dtype, module=module)


# routes[r]: the global expert ids of rank r's tokens, in token order.
CASES_2 = [
    # Uneven: rank 0 receives 3 + 4 rows, rank 1 4 + 1.
    _case("uneven-swiglu-s4", E2, [[3, 0, 1, 3, 2, 0, 3], [1, 1, 0, 0, 3]]),
    # Only expert 0 is used: expert 1 has zero tokens, rank 1 receives none.
    _case("rank1-receives-none-bias-geglu", E2, [[0, 0, 0, 0, 0], [0, 0, 0]], bias=True, activation="geglu",
          glu_interleave=None),
    # Rank 0 has no tokens; expert 1 none either.
    _case("T0-on-rank0-bias-halves", E2, [[], [2, 3, 0, 2, 2, 3, 3, 0]], bias=True, glu_interleave=None),
    _case("bf16", E2, [[1, 2, 2, 3, 0, 1, 3], [0, 3, 3, 1]], dtype=torch.bfloat16),
    # A recipe runs its kernels (interpreter) on the local experts.
    _case("recipe-mxfp8", E2, [[1, 2, 2, 3, 0, 1], [0, 3, 3]], hidden=32, ffn=32, recipe="mxfp8", glu_interleave=16),
]
# Double backward (create_graph=True): fp32 without a recipe (recipes have none).
CASES_SECOND_ORDER = CASES_2[:2]
# Four ranks, 8 experts: rank 1 has no tokens, nobody routes to rank 3's experts 6 and 7.
CASES_4 = [_case("world4", 8, [[0, 5, 2, 2, 4, 1], [], [1, 1, 0, 3], [5, 4, 4, 0, 2]])]
# The same four ranks as two process groups of two (process_group=, group ranks != world ranks).
CASES_PAIRS = CASES_2[:1]
# NCCL: the CPU cases on the GPUs (kernels compiled), and a larger bf16 one (377 rows, 8 experts).
CASES_GPU = CASES_2 + [_case("bf16-H256-F128", 8, [[i * 5 % 8 for i in range(300)], [i % 3 for i in range(77)]],
                             hidden=256, ffn=128, dtype=torch.bfloat16, glu_interleave=32)]


# --- the spawned ranks ---------------------------------------------------------------------------

def _init(rank, world, init_file, backend, timeout_s):
    torch.set_num_threads(1)     # tiny tensors; more threads only wait on each other (conftest)
    if backend == "nccl":
        torch.cuda.set_device(rank)
    # A short timeout: a test that desynchronizes the ranks fails instead of hanging.
    dist.init_process_group(backend, init_method=f"file://{init_file}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=timeout_s))
    return torch.device("cuda", rank) if backend == "nccl" else torch.device("cpu")


def _inputs(case, device):
    """Every rank's (x, expert_ids, probs, dy), drawn from one seed (all ranks draw them all)."""
    g = torch.Generator().manual_seed(sum(map(ord, case["name"])))
    out = []
    for ids in case["routes"]:
        n = len(ids)
        x = torch.randn(n, case["hidden"], generator=g)
        probs = torch.rand(n, generator=g) + 0.1
        dy = torch.randn(n, case["hidden"], generator=g)
        out.append([x.to(device, case["dtype"]), torch.tensor(ids, dtype=torch.int64, device=device),
                    probs.to(device), dy.to(device, case["dtype"])])
    return out


def _full_module(case, device):
    torch.manual_seed(7)
    return GroupedGLUMLP(case["n_experts"], case["hidden"], case["ffn"], **case["module"]).to(device, case["dtype"])


def _full_forward(case, full, inputs):
    """The full module on all ranks' tokens (concatenated, sorted by expert, run, and put back
    in the concatenated order): (x, probs, dy, y, counts), x and probs requiring grad."""
    x = torch.cat([i[0] for i in inputs]).requires_grad_(True)
    ids = torch.cat([i[1] for i in inputs])
    probs = torch.cat([i[2] for i in inputs]).requires_grad_(True)
    dy = torch.cat([i[3] for i in inputs])
    order = torch.argsort(ids, stable=True)
    counts = torch.bincount(ids, minlength=case["n_experts"])
    y_sorted = full(x[order], counts, probs[order])
    y = torch.empty_like(y_sorted)
    y[order] = y_sorted
    return x, probs, dy, y, counts


def _reference(case, full, inputs):
    """The full module on all ranks' tokens: (y, dx, dprobs) in the concatenated token order,
    the parameter gradients, and the tokens per expert."""
    x, probs, dy, y, counts = _full_forward(case, full, inputs)
    params = list(full.parameters())
    grads = torch.autograd.grad(y, [x, probs, *params], dy)
    return y.detach(), grads[0], grads[1], dict(zip([n for n, _ in full.named_parameters()], grads[2:])), counts


GRADS = {"x": "dx", "probs": "dprobs", "fc1_weight": "dw1", "fc2_weight": "dw2", "fc1_bias": "db1",
         "fc2_bias": "db2"}


def _check_case(case, group, device) -> None:
    full = _full_module(case, device)
    inputs = _inputs(case, device)
    y_ref, dx_ref, dp_ref, grads_ref, counts = _reference(case, full, inputs)

    rank, world = dist.get_rank(group), dist.get_world_size(group)
    ep = ExpertParallelGLUMLP.from_grouped(full, process_group=None if group is dist.group.WORLD else group)
    assert ep.rank == rank and ep.world_size == world
    assert ep.num_local_experts == case["n_experts"] // world and ep.expert_offset == rank * ep.num_local_experts
    x, ids, probs, dy = inputs[rank]
    x, probs = x.clone().requires_grad_(True), probs.clone().requires_grad_(True)
    y = ep(x, ids, probs)
    y.backward(dy)

    start = sum(len(r) for r in case["routes"][:rank])
    rows = slice(start, start + len(case["routes"][rank]))
    local = slice(ep.expert_offset, ep.expert_offset + ep.num_local_experts)
    got = {"y": y.detach(), "dx": x.grad, "dprobs": probs.grad}
    want = {"y": y_ref[rows], "dx": dx_ref[rows], "dprobs": dp_ref[rows]}
    for name, param in ep.experts.named_parameters():
        got[GRADS[name]], want[GRADS[name]] = param.grad, grads_ref[name][local]
        for j in range(ep.num_local_experts):      # experts without tokens: exactly zero
            assert counts[ep.expert_offset + j] > 0 or torch.count_nonzero(param.grad[j]) == 0, \
                f"{name}: expert {ep.expert_offset + j} has no tokens"
    for name in got:
        assert got[name].shape == want[name].shape and got[name].dtype == want[name].dtype, name
    if case["dtype"] == torch.float32 and not case["module"].get("recipe"):
        for name in got:
            tol = {k: 2 * v for k, v in fp32_tolerance(counts.tolist(), case["hidden"], case["ffn"],
                                                        want[name]).items()}
            torch.testing.assert_close(got[name], want[name], **tol, msg=lambda m, name=name: f"{name}: {m}")
    else:
        assert "db1" not in got, "the normwise comparison covers no bias gradient"
        module = case["module"]
        problem = problem_for(torch.cat([i[0] for i in inputs]), full.fc2_weight, full.activation,
                              full.glu_interleave, False, module.get("recipe"))
        errors = FAMILY.compare(problem, None, got, want)
        assert not errors, errors


def _check_arguments(rank, device) -> dict[str, str]:
    """Each bad call raises on this rank before any collective (the out-of-range ids: on
    every rank, after the count exchange). Returns case -> "ok" or what went wrong."""
    ep = ExpertParallelGLUMLP(E2, H, F, glu_interleave=4, device=device)
    x, ids = torch.randn(3, H, device=device), torch.tensor([0, 3, 1], device=device)
    probs = torch.rand(3, device=device)
    cases = {
        "num_experts-not-multiple-of-world": (ValueError, "num_experts = 3 must be a multiple",
                                              lambda: ExpertParallelGLUMLP(3, H, F, glu_interleave=4)),
        "num_experts-0": (ValueError, "num_experts", lambda: ExpertParallelGLUMLP(0, H, F, glu_interleave=4)),
        "process_group-str": (TypeError, "process_group",
                              lambda: ExpertParallelGLUMLP(E2, H, F, glu_interleave=4, process_group="world")),
        "activation": (ValueError, "activation", lambda: ExpertParallelGLUMLP(E2, H, F, activation="relu")),
        "glu_interleave": (ValueError, "glu_interleave", lambda: ExpertParallelGLUMLP(E2, H, F, glu_interleave=3)),
        "dtype": (TypeError, "ExpertParallelGLUMLP: dtype must be",
                  lambda: ExpertParallelGLUMLP(E2, H, F, glu_interleave=4, dtype=torch.float64)),
        "from_grouped-not-grouped": (TypeError, "mlp must be a GroupedGLUMLP",
                                     lambda: ExpertParallelGLUMLP.from_grouped(torch.nn.Linear(2, 2))),
        "process_group-set-to-str": (TypeError, "process_group",
                                     lambda: setattr(copy.deepcopy(ep), "process_group", "world")),
        "x-float64": (TypeError, "x is torch.float64", lambda: ep(x.double(), ids, probs)),
        "x-list": (TypeError, "x must be a torch.Tensor", lambda: ep(x.tolist(), ids, probs)),
        "x-width": (ValueError, "x must be (T, H)", lambda: ep(torch.randn(3, H + 1, device=device), ids, probs)),
        "expert_ids-float": (TypeError, "expert_ids must be int32 or int64", lambda: ep(x, ids.float(), probs)),
        "expert_ids-length": (ValueError, "expert_ids must be (T,)", lambda: ep(x, ids[:2], probs)),
        "probs-int": (TypeError, "probs must be float32", lambda: ep(x, ids, ids)),
        "probs-2d": (ValueError, "probs must be (T,)", lambda: ep(x, ids, probs[:, None])),
    }
    # new_group leaves rank 1 out: torch 2.13 returns it an int sentinel, not a ProcessGroup
    without_1 = dist.new_group([0])
    if rank == 1:
        cases["process_group-without-this-rank"] = (
            ValueError, "process_group does not contain this process (rank 1 of the world)",
            lambda: ExpertParallelGLUMLP(E2, H, F, glu_interleave=4, process_group=without_1))
        cases["process_group-set-without-this-rank"] = (
            ValueError, "process_group does not contain this process",
            lambda: setattr(copy.deepcopy(ep), "process_group", without_1))
    if device.type == "cuda":
        cases["probs-on-cpu"] = (ValueError, "probs is on cpu", lambda: ep(x, ids, probs.cpu()))
    elif HAS_CUDA:
        cases["x-on-cuda"] = (ValueError, "x is on cuda", lambda: ep(x.cuda(), ids, probs))
    # Collective: rank 1's ids are out of range; every rank raises, naming rank 1's two ids.
    bad = torch.tensor([0, E2, -1], device=device) if rank == 1 else ids
    cases["expert_ids-out-of-range-on-rank-1"] = (ValueError, "expert_ids must be global expert indices in [0, 4)"
                                                  "; ids outside it per rank of the process group: rank 1: 2",
                                                  lambda: ep(x, bad, probs))
    # Collective: ranks that hold different modules, or call forward differently (x requiring
    # grad on rank 1 only), all raise the same error instead of pairing mismatched collectives.
    other = ExpertParallelGLUMLP(E2 if rank == 0 else 2 * E2, H, F, glu_interleave=4, device=device)
    cases["modules-differ-across-ranks"] = (ValueError, "the ranks of the process group hold different modules",
                                            lambda: other(x, ids, probs))
    xg = x.clone().requires_grad_(rank == 1)
    cases["requires-grad-differs-across-ranks"] = (ValueError, "must call forward alike",
                                                   lambda: ep(xg, ids, probs))
    # rank 1's experts frozen: its output would need no backward while rank 0's enters the
    # backward's all-to-all (a hang): the ranks raise instead
    frozen = copy.deepcopy(ep).requires_grad_(rank == 0)
    cases["parameters-requires-grad-differs-across-ranks"] = (ValueError, "must call forward alike",
                                                              lambda: frozen(x, ids, probs))
    out = {}
    for name, (exc, text, call) in cases.items():
        try:
            call()
        except exc as e:
            out[name] = "ok" if text in str(e) else f"{type(e).__name__} without {text!r}: {e}"
        except Exception as e:  # noqa: BLE001 - reported per case
            out[name] = f"{type(e).__name__} instead of {exc.__name__}: {e}"
        else:
            out[name] = f"no {exc.__name__}"
    # The group still works after the collective error.
    y = ep(x, ids, probs)
    out["forward-after-error"] = "ok" if y.shape == (3, H) and torch.isfinite(y).all() else f"bad y {y}"
    return out


def _check_dtypes(rank, device) -> dict[str, str]:
    """Ranks that differ in a dtype: probs float32 on rank 0 and x's dtype on rank 1 (each valid
    alone) run as float32 probs on both, the gradient in each caller's dtype; experts converted
    to another dtype on rank 0 only, after a first forward the ranks agreed on, make every rank
    raise the modules' ValueError in the same collective, and the group still works after it.
    Returns case -> "ok" or what went wrong."""
    out = {}
    g = torch.Generator().manual_seed(11)
    ids = torch.tensor([0, 1, 2, 3, 0, 3], device=device)
    x = torch.randn(6, H, generator=g).to(device)
    dy = torch.randn(6, H, generator=g).to(device, torch.bfloat16)
    probs16 = torch.rand(6, generator=g).to(device, torch.bfloat16)
    torch.manual_seed(5 + rank)
    ep = ExpertParallelGLUMLP(E2, H, F, glu_interleave=4, device=device, dtype=torch.bfloat16)
    mixed = (probs16.float() if rank == 0 else probs16.clone()).requires_grad_(True)
    both32 = probs16.float().requires_grad_(True)
    y_mixed, y_32 = ep(x.bfloat16(), ids, mixed), ep(x.bfloat16(), ids, both32)
    y_mixed.backward(dy)
    y_32.backward(dy)
    if not torch.equal(y_mixed, y_32):
        out["probs-dtype-differs-across-ranks"] = f"y differs from float32 probs': {(y_mixed - y_32).abs().max()}"
    elif mixed.grad.dtype != mixed.dtype or not torch.equal(mixed.grad, both32.grad.to(mixed.dtype)):
        out["probs-dtype-differs-across-ranks"] = f"dprobs {mixed.grad} for {mixed.dtype} probs, want {both32.grad}"
    else:
        out["probs-dtype-differs-across-ranks"] = "ok"

    m = ExpertParallelGLUMLP(E2, H, F, glu_interleave=4, device=device)
    probs = torch.rand(6, generator=g).to(device)
    m(x, ids, probs)                                  # agreed: float32 on both ranks
    if rank == 0:
        m.to(torch.bfloat16)
    text = "hold different modules: per rank (num_experts, hidden_size, ffn_hidden_size, dtype code) " \
           "rank 0: (4, 16, 8, 1), rank 1: (4, 16, 8, 0)"
    try:
        m(x.to(m.experts.fc1_weight.dtype), ids, probs)
    except ValueError as e:
        out["experts-converted-on-one-rank"] = "ok" if text in str(e) else f"ValueError without {text!r}: {e}"
    except Exception as e:  # noqa: BLE001 - reported per case
        out["experts-converted-on-one-rank"] = f"{type(e).__name__} instead of ValueError: {e}"
    else:
        out["experts-converted-on-one-rank"] = "no ValueError"
    m.to(torch.bfloat16)                              # converted on every rank: runs
    y = m(x.bfloat16(), ids, probs)
    out["experts-converted-on-every-rank"] = "ok" if y.dtype == torch.bfloat16 and y.isfinite().all() else f"bad y {y}"
    return out


def _outcomes(cases) -> dict[str, str]:
    """Run each case (a callable raising AssertionError on a wrong result): case -> "ok" or
    what went wrong. Every case runs on every rank, so a collective error leaves none waiting."""
    out = {}
    for name, call in cases.items():
        try:
            call()
            out[name] = "ok"
        except Exception:  # noqa: BLE001 - reported per case
            out[name] = traceback.format_exc()
    return out


def _check_alike(rank, device) -> dict[str, str]:
    """Calls that differ between the ranks in what changes none of the backward's collectives
    run, and give what calls that do not differ give (bitwise: one path on the CPU)."""
    torch.manual_seed(7)
    full = GroupedGLUMLP(E2, H, F, glu_interleave=4).to(device)
    g = torch.Generator().manual_seed(rank)
    x, probs, dy = torch.randn(3, H, generator=g), torch.rand(3, generator=g), torch.randn(3, H, generator=g)
    x, probs, dy = x.to(device), probs.to(device), dy.to(device)
    ids = torch.tensor([0, 2, 3] if rank == 0 else [1, 1, 2], device=device)

    def run(module, *, x_grad=True, probs_grad=True):
        xg, pg = x.clone().requires_grad_(x_grad), probs.clone().requires_grad_(probs_grad)
        y = module(xg, ids, pg)
        if y.requires_grad:
            y.backward(dy)
        return y.detach(), xg.grad, pg.grad, [p.grad for p in module.experts.parameters()]

    def partly_frozen():
        # experts 0-1 frozen in the full module: rank 0's share is all frozen, rank 1's trains
        trained = ExpertParallelGLUMLP.from_grouped(full)
        frozen = ExpertParallelGLUMLP.from_grouped(full).requires_grad_(rank == 1)
        want, got = run(trained), run(frozen)
        for a, b in zip(got[:3], want[:3]):
            assert torch.equal(a, b), (a, b)
        for a, b in zip(got[3], want[3]):
            assert (a is None) if rank == 0 else torch.equal(a, b), (a, b)

    def x_grad_under_no_grad():
        ep = ExpertParallelGLUMLP.from_grouped(full)
        with torch.no_grad():
            got = run(ep, x_grad=rank == 1, probs_grad=rank == 0)
            want = run(ep, x_grad=False, probs_grad=False)
        assert torch.equal(got[0], want[0])

    def grad_mode_without_grads():
        # all experts frozen and nothing requiring grad: rank 0 under no_grad, rank 1 not
        ep = ExpertParallelGLUMLP.from_grouped(full).requires_grad_(False)
        with torch.set_grad_enabled(rank == 1):
            got = run(ep, x_grad=False, probs_grad=False)
        assert torch.equal(got[0], run(ep, x_grad=False, probs_grad=False)[0])

    return _outcomes({"experts-frozen-on-rank-0-only": partly_frozen,
                      "x-and-probs-requires-grad-differ-under-no-grad": x_grad_under_no_grad,
                      "grad-mode-differs-nothing-requires-grad": grad_mode_without_grads})


def _check_pickles(rank, device, out_dir) -> dict[str, str]:
    """torch.save / torch.load of the module: each rank's own file runs as the original; rank
    0's file loaded on every rank, or a module given a process group of another size, makes
    every rank raise in its first forward (the module would run another rank's experts).
    Leaves ep-rank{r}.pt in out_dir (test_a_module_pickled_in_a_larger_world_raises)."""
    torch.manual_seed(7)
    ep = ExpertParallelGLUMLP.from_grouped(GroupedGLUMLP(E2, H, F, glu_interleave=4).to(device))
    g = torch.Generator().manual_seed(rank)
    x, probs = torch.randn(5, H, generator=g).to(device), torch.rand(5, generator=g).to(device)
    ids = torch.tensor([3, 0, 1, 2, 3], device=device)
    y = ep(x, ids, probs)                              # agreed before pickling
    torch.save(ep, Path(out_dir) / f"ep-rank{rank}.pt")
    dist.barrier()
    singles = [dist.new_group([r]) for r in range(2)]   # every rank makes every group

    def raises(module, text):
        try:
            module(x, ids, probs)
        except ValueError as e:
            assert text in str(e), str(e)
        else:
            raise AssertionError("no ValueError")

    def own():
        assert torch.equal(torch.load(Path(out_dir) / f"ep-rank{rank}.pt", weights_only=False)(x, ids, probs), y)

    def rank_0s():
        raises(torch.load(Path(out_dir) / "ep-rank0.pt", weights_only=False),
               "the modules do not match the ranks that run them: per rank of the process group (size 2), the rank "
               "and group size its module was built for: rank 0: rank 0 of 2 (experts [0, 2)), rank 1: rank 0 of 2 "
               "(experts [0, 2)). A module saved on one rank (torch.save) and loaded on another")

    def new_group():
        m = torch.load(Path(out_dir) / f"ep-rank{rank}.pt", weights_only=False)
        assert torch.equal(m(x, ids, probs), y)
        m.process_group = singles[rank]
        raises(m, f"per rank of the process group (size 1), the rank and group size its module was built for: "
                  f"rank 0: rank {rank} of 2 (experts [{2 * rank}, {2 * rank + 2}))")
        m.process_group = None                         # the world again: agrees and runs
        assert torch.equal(m(x, ids, probs), y)

    out = _outcomes({"own-pickle-runs": own, "rank-0s-pickle-on-every-rank": rank_0s,
                     "process_group-of-another-size": new_group})
    out["forward-after-error"] = "ok" if torch.equal(ep(x, ids, probs), y) else "another y"
    return out


def _check_second_order(case, device) -> None:
    """A gradient penalty through the module (``create_graph=True``, then a backward through
    the gradients) equals the one-process module's: each rank's penalty covers its own tokens,
    so the ranks' penalties sum to the penalty of all tokens, and each rank's gradients are
    those of that sum. Tolerance: the second backward differentiates the first, so each side
    runs three passes of the first-order reductions (forward, backward, backward of the
    backward): three times the first-order bound each, six times apart."""
    full = _full_module(case, device)
    inputs = _inputs(case, device)

    def penalty(y, x, probs, dy):
        dx, dprobs = torch.autograd.grad((y * dy).sum(), [x, probs], create_graph=True)
        return (y * dy).sum() + dx.square().sum() + dprobs.square().sum()

    x, probs, dy, y, counts = _full_forward(case, full, inputs)
    params = dict(full.named_parameters())
    grads_ref = torch.autograd.grad(penalty(y, x, probs, dy), [x, probs, *params.values()])

    rank = dist.get_rank()
    ep = ExpertParallelGLUMLP.from_grouped(full)
    xr, ids_r, pr, dy_r = inputs[rank]
    xr, pr = xr.clone().requires_grad_(True), pr.clone().requires_grad_(True)
    penalty(ep(xr, ids_r, pr), xr, pr, dy_r).backward()
    start = sum(len(r) for r in case["routes"][:rank])
    rows = slice(start, start + len(case["routes"][rank]))
    local = slice(ep.expert_offset, ep.expert_offset + ep.num_local_experts)
    got = {"dx": xr.grad, "dprobs": pr.grad, **{GRADS[n]: p.grad for n, p in ep.experts.named_parameters()}}
    want = {"dx": grads_ref[0][rows], "dprobs": grads_ref[1][rows],
            **{GRADS[n]: g[local] for n, g in zip(params, grads_ref[2:])}}
    for name in want:
        tol = {k: 6 * v for k, v in fp32_tolerance(counts.tolist(), case["hidden"], case["ffn"],
                                                    want[name]).items()}
        torch.testing.assert_close(got[name], want[name], **tol, msg=lambda m, name=name: f"{name}: {m}")


def _check_state_dicts(rank, device, out_dir) -> dict[str, str]:
    """Each rank's state dict records (num_experts, world size, rank); loading checks it on
    the loading rank (no collective): rank 0's state dict loaded on every rank, or one of
    E = 8 on 4 ranks (the same local shapes) on a module of E = 4 on 2, raises naming what
    differs and leaves the experts as they were; one without the record warns and reports it
    missing. The documented round trips still work: each rank's own state dict, and a full
    checkpoint (the ranks' experts concatenated) loaded into a GroupedGLUMLP and sharded with
    from_grouped."""
    torch.manual_seed(7)
    full = GroupedGLUMLP(E2, H, F, glu_interleave=4).to(device)
    ep = ExpertParallelGLUMLP.from_grouped(full)
    state = ep.state_dict()
    torch.save(state, Path(out_dir) / f"sd-rank{rank}.pt")
    dist.barrier()

    def fresh():
        torch.manual_seed(100 + rank)
        return ExpertParallelGLUMLP(E2, H, F, glu_interleave=4, device=device)

    def same(a, b):
        return all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))

    def refused(module, loaded, text):
        before = copy.deepcopy(module)
        try:
            module.load_state_dict(loaded)
        except RuntimeError as e:
            assert text in str(e), str(e)
        else:
            raise AssertionError("no RuntimeError")
        assert same(module, before), "the refused state dict was loaded"

    def own():
        assert torch.equal(state["expert_shard"], torch.tensor([E2, 2, rank]))
        m = fresh()
        m.load_state_dict(torch.load(Path(out_dir) / f"sd-rank{rank}.pt"))
        assert same(m, ep)

    def rank_0s():
        # nested (the key's prefix) and loaded on every rank: rank 1 refuses
        model = torch.nn.Sequential(fresh())
        loaded = {f"0.{k}": v for k, v in torch.load(Path(out_dir) / "sd-rank0.pt").items()}
        if rank == 0:
            model.load_state_dict(loaded)
            assert same(model[0], ep)
        else:
            refused(model, loaded, "ExpertParallelGLUMLP: the state dict holds rank 0 of 2's experts [0, 2) of 4, "
                                   "but this module holds rank 1 of 2's experts [2, 4) of 4 (rank 0 != 1)")

    def other_world():
        loaded = dict(state, expert_shard=torch.tensor([2 * E2, 4, rank]))
        refused(fresh(), loaded, f"holds rank {rank} of 4's experts [{2 * rank}, {2 * rank + 2}) of 8, but this "
                                 f"module holds rank {rank} of 2's experts [{2 * rank}, {2 * rank + 2}) of 4 "
                                 f"(num_experts 8 != 4, world size 4 != 2)")

    def malformed():
        refused(fresh(), dict(state, expert_shard=torch.tensor(float(rank))), "'expert_shard' must be a (3,) integer")

    def without_record():
        loaded = {k: v for k, v in state.items() if k != "expert_shard"}
        m = fresh()
        # (not pytest.warns: its failure is no Exception, which _outcomes would not catch)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                m.load_state_dict(loaded)
            except RuntimeError as e:
                assert 'Missing key(s) in state_dict: "expert_shard"' in str(e), str(e)
            else:
                raise AssertionError("strict=True loaded a state dict without the record")
            assert m.load_state_dict(loaded, strict=False).missing_keys == ["expert_shard"]
        warned = [str(w.message) for w in caught if "the state dict has no 'expert_shard'" in str(w.message)]
        assert len(warned) == 2, [str(w.message) for w in caught]
        assert same(m, ep)

    def full_checkpoint():
        parts = [torch.load(Path(out_dir) / f"sd-rank{r}.pt") for r in range(2)]
        merged = {k[len("experts."):]: parts[0][k] if k == "experts.glu_layout" else torch.cat([p[k] for p in parts])
                  for k in parts[0] if k.startswith("experts.")}
        whole = GroupedGLUMLP(E2, H, F, glu_interleave=4).to(device)
        whole.load_state_dict(merged)
        assert same(whole, full) and same(ExpertParallelGLUMLP.from_grouped(whole), ep)

    def refused_with_assign():
        # assign=True: the refusal keeps the very Parameter objects (an optimizer holds them)
        m = fresh()
        params = list(m.parameters())
        loaded = dict(state, expert_shard=torch.tensor([E2, 2, 1 - rank]))
        try:
            m.load_state_dict(loaded, assign=True)
        except RuntimeError as e:
            assert "rank" in str(e), str(e)
        else:
            raise AssertionError("no RuntimeError")
        assert all(a is b for a, b in zip(m.parameters(), params)), "the Parameters were replaced"

    def meta_and_fake_records():
        # a meta state dict (deferred initialisation, assign=True) and a fake one (memory
        # estimates) load with a warning that the record holds no value to check, as
        # GroupedGLUMLP's glu_layout does; a real record is still checked inside a FakeTensorMode
        from torch._subclasses.fake_tensor import FakeTensorMode
        meta = {k: v.to("meta") for k, v in state.items()}
        another = dict(state, expert_shard=torch.tensor([E2, 2, 1 - rank]))   # real: made outside the mode
        m = ExpertParallelGLUMLP(E2, H, F, glu_interleave=4, device="meta")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            m.load_state_dict(meta, assign=True)
            with FakeTensorMode(allow_non_fake_inputs=True) as mode:
                fake = {k: mode.from_tensor(v) for k, v in state.items()}
                fresh().load_state_dict(fake)
                try:
                    fresh().load_state_dict(another)
                except RuntimeError as e:
                    assert "rank" in str(e), str(e)
                else:
                    raise AssertionError("a real record of another rank loaded inside a FakeTensorMode")
        assert m.experts.fc1_weight.is_meta
        for kind in ("meta", "fake"):
            assert any(f"'expert_shard' is a {kind} tensor without a value" in str(w.message) for w in caught), kind

    def checkpoint_helpers():
        # torch.distributed.checkpoint's state-dict helpers look a nested module's keys up by
        # attribute (expert_shard included)
        from torch.distributed.checkpoint.state_dict import get_model_state_dict, set_model_state_dict
        model = torch.nn.Sequential(torch.nn.Identity(), fresh())
        model[1].load_state_dict(state)
        got = get_model_state_dict(model)
        assert torch.equal(got["1.expert_shard"], torch.tensor([E2, 2, rank]))
        other = torch.nn.Sequential(torch.nn.Identity(), fresh())
        set_model_state_dict(other, got)
        assert same(other[1], ep)

    return _outcomes({"own-state-dict": own, "rank-0s-state-dict-on-every-rank": rank_0s,
                      "state-dict-of-another-world": other_world, "malformed-record": malformed,
                      "state-dict-without-the-record": without_record, "full-checkpoint": full_checkpoint,
                      "refused-with-assign": refused_with_assign, "checkpoint-helpers": checkpoint_helpers,
                      "meta-and-fake-records": meta_and_fake_records})


def _check_regroup(rank, device) -> dict[str, str]:
    """Setting the process group already in use on one rank only (the world, as None or as
    the group) changes nothing: the next forward runs on both ranks (a new agreement on rank 1
    alone would wait in its all-gather while rank 0 waits in the count exchange)."""
    torch.manual_seed(7)
    ep = ExpertParallelGLUMLP(E2, H, F, glu_interleave=4, device=device)
    g = torch.Generator().manual_seed(rank)
    x, probs = torch.randn(5, H, generator=g).to(device), torch.rand(5, generator=g).to(device)
    ids = torch.tensor([3, 0, 1, 2, 3], device=device)
    y = ep(x, ids, probs)

    def same_group(value):
        if rank == 1:
            ep.process_group = value
        assert ep.process_group is dist.group.WORLD
        assert torch.equal(ep(x, ids, probs), y)
    return _outcomes({"world-as-None-on-rank-1": lambda: same_group(None),
                      "world-on-rank-1": lambda: same_group(dist.group.WORLD)})


def _keys_used(ep, routes):
    """The grouped_glu_mlp keys a forward of ``routes`` uses on each rank (its received rows)."""
    keys = []
    for r in range(len(routes)):
        n = sum(1 for ids in routes for e in ids if e // ep.num_local_experts == r)
        keys.append(FAMILY.key(GroupedProblem.of(n, H, F, ep.num_local_experts, 4, "swiglu", 4, False)))
    return keys


def _check_tune(rank, device, out_dir) -> dict:
    """tilefuse.tune(ep, inputs) with per-rank cache files that disagree and per-rank fake
    timers that favour different candidates: rank 0 decides, every rank ends the same."""
    os.environ["TILEFUSE_CACHE_DIR"] = str(Path(out_dir) / f"cache{rank}")    # separate local files
    store.builtin_dir = lambda: Path(out_dir) / "no-builtin"
    tuning.reload()
    # Rank 0 receives 5 rows (key T8), rank 1 11 (key T16).
    routes = [[0, 1, 1, 2, 3, 3, 2, 2, 3], [0, 0, 2, 3, 3, 2, 2]]
    torch.manual_seed(3)
    ep = ExpertParallelGLUMLP(E2, H, F, glu_interleave=4, device=device)
    key8, key16 = _keys_used(ep, routes)
    assert key8.endswith("-T8-swiglu-s4") and key16.endswith("-T16-swiglu-s4"), (key8, key16)
    candidates = FAMILY.candidates(FAMILY.problem_for_key(key16))
    # Rank 0 has swept key8 (the baseline won); rank 1's own file says another config won.
    local = BASELINE if rank == 0 else FAMILY.config_to_dict(candidates[3])
    table.record("grouped_glu_mlp", {key8: {"winner": local}})
    n = len(routes[rank])
    x = torch.randn(n, H, device=device, requires_grad=True)
    ids = torch.tensor(routes[rank], device=device)
    probs = torch.rand(n, device=device)
    results = tilefuse.tune(ep, (x, ids, probs), timer=FakeTimer(candidates[rank].name, 0.8), rounds=2,
                            progress=False, device=device.type)

    def describe(key):
        entry = tuning.get_entry("grouped_glu_mlp", key)
        return None if entry is None else FAMILY.describe(entry)

    def routed(key):
        found = op.route(FAMILY.problem_for_key(key), device)
        return found if isinstance(found, str) or found is None else found.name
    with tilefuse.level(2):
        return {"swept": [r.key for r in results], "entries": {k: describe(k) for k in (key8, key16)},
                "routes": {k: routed(k) for k in (key8, key16)},
                "expected": {key8: BASELINE, key16: candidates[0].name},
                "expected_routes": {key8: op.COMPOSE, key16: candidates[0].name}}


def _host_syncs(device):
    """The synchronizing CUDA operations of one plan_dispatch (after a first one set up the
    communicator), as torch.cuda's sync debug mode reports them."""
    from tilefuse.nn.expert_parallel import plan_dispatch
    ids = torch.tensor([1, 0, 1, 1], device=device)
    plan_dispatch(ids, 2, 1, dist.group.WORLD, (1, 0, 1))
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("warn")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            plan_dispatch(ids, 2, 1, dist.group.WORLD, (1, 0, 1))
    finally:
        torch.cuda.set_sync_debug_mode(0)
    return [str(w.message) for w in caught if "synchroniz" in str(w.message)]


def _check_copies(device):
    """copy.deepcopy of the module (an EMA's copy): the same process group, its own parameters
    of equal values, and the same output; the original's parameters untouched by the copy's
    update."""
    m = ExpertParallelGLUMLP(4, H, F, glu_interleave=4, device=device)
    c = copy.deepcopy(m)
    assert c.process_group is m.process_group and c.rank == m.rank
    assert all(p is not q and torch.equal(p, q) for p, q in zip(m.parameters(), c.parameters()))
    g = torch.Generator().manual_seed(7)
    x, ids, probs = torch.randn(6, H, generator=g), torch.tensor([0, 3, 1, 1, 2, 0]), torch.rand(6, generator=g)
    x, ids, probs = x.to(device), ids.to(device), probs.to(device)
    assert torch.equal(c(x, ids, probs), m(x, ids, probs))
    with torch.no_grad():
        c.experts.fc1_weight.mul_(2)
    assert not torch.equal(c.experts.fc1_weight, m.experts.fc1_weight)
    return "ok"


def _worker(rank, world, init_file, out_dir, backend, sections, collective_timeout_s):
    device = _init(rank, world, init_file, backend, collective_timeout_s)
    report = {}
    try:
        for section in sections:
            if section == "arguments":
                report[section] = _check_arguments(rank, device)
            elif section == "dtypes":
                report[section] = _check_dtypes(rank, device)
            elif section == "alike":
                report[section] = _check_alike(rank, device)
            elif section == "pickles":
                report[section] = _check_pickles(rank, device, out_dir)
            elif section == "state_dicts":
                report[section] = _check_state_dicts(rank, device, out_dir)
            elif section == "regroup":
                report[section] = _check_regroup(rank, device)
            elif section == "second_order":
                report[section] = _outcomes({case["name"]: functools.partial(_check_second_order, case, device)
                                             for case in CASES_SECOND_ORDER})
            elif section == "tune":
                report[section] = _check_tune(rank, device, out_dir)
            elif section == "syncs":
                report[section] = _host_syncs(device)
            elif section == "copies":
                try:
                    report[section] = _check_copies(device)
                except AssertionError:
                    report[section] = traceback.format_exc()
            else:                                      # a list of equality cases
                cases = {"cases2": CASES_2, "cases4": CASES_4, "gpu": CASES_GPU, "pairs": CASES_PAIRS}[section]
                group = dist.group.WORLD
                if section == "pairs":                 # ranks {0, 1} and {2, 3} as two groups
                    pairs = [dist.new_group([r, r + 1]) for r in range(0, world, 2)]
                    group = pairs[rank // 2]
                report[section] = {}
                for case in cases:
                    try:
                        _check_case(case, group, device)
                        report[section][case["name"]] = "ok"
                    except AssertionError:          # a comparison, after every collective of the case
                        report[section][case["name"]] = traceback.format_exc()
    finally:
        with open(Path(out_dir) / f"rank{rank}.json", "w") as f:
            json.dump(report, f)
        dist.destroy_process_group()
    # Everything ran and the report is written: leave without the interpreter's exit-time
    # destructors. After a gloo collective, torch 2.13's CPU build aborts there now and then
    # ("terminate called without an active exception", SIGABRT: a plain all_to_all_single or
    # all_gather, then destroy_process_group, in 2 of 10 spawns), which failed the whole run.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _spawn(tmp_path, world, backend, sections, timeout_s=240, collective_timeout_s=60):
    """Run ``sections`` on ``world`` spawned ranks; return each rank's report. A collective
    waits ``collective_timeout_s`` at most (then raises), the whole run ``timeout_s``."""
    ctx = mp.spawn(_worker, args=(world, str(tmp_path / "init"), str(tmp_path), backend, sections,
                                  collective_timeout_s), nprocs=world, join=False)
    deadline = time.monotonic() + timeout_s
    while not ctx.join(timeout=1):            # raises if a rank failed
        if time.monotonic() > deadline:
            for p in ctx.processes:
                p.terminate()
            pytest.fail(f"the {world} ranks did not finish within {timeout_s} s")
    return [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(world)]


def _assert_all_ok(reports, section):
    failed = [f"rank {r} {name}: {outcome}" for r, report in enumerate(reports)
              for name, outcome in report[section].items() if outcome != "ok"]
    assert not failed, "\n".join(failed)


# --- the tests -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def two_ranks_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("ep2")


@pytest.fixture(scope="module")
def two_ranks(two_ranks_dir):
    """One group of two gloo ranks runs the argument checks, the equality cases and the tune."""
    sections = ["arguments", "cases2", "copies", "alike", "pickles", "state_dicts", "second_order"] + \
        ([] if HAS_CUDA else ["tune"])
    return _spawn(two_ranks_dir, 2, "gloo", sections)


@pytest.fixture(scope="module")
def short_timeout_ranks(tmp_path_factory):
    """Two gloo ranks whose collectives wait 20 s at most: the cases where ranks could end up
    in different collectives (mismatched collectives abort gloo, or wait until the timeout)
    fail fast instead of hanging."""
    return _spawn(tmp_path_factory.mktemp("ep2-short"), 2, "gloo", ["dtypes", "regroup"], timeout_s=120,
                  collective_timeout_s=20)


def test_bad_arguments_name_the_argument(two_ranks):
    _assert_all_ok(two_ranks, "arguments")
    assert len(two_ranks[0]["arguments"]) >= 16
    assert two_ranks[1]["arguments"]["modules-differ-across-ranks"] == "ok"


def test_a_deepcopy_shares_the_process_group(two_ranks):
    assert [r["copies"] for r in two_ranks] == ["ok", "ok"]


def test_ranks_may_differ_where_no_backward_collective_does(two_ranks):
    _assert_all_ok(two_ranks, "alike")
    assert all(len(r["alike"]) == 3 for r in two_ranks)


def test_a_module_pickled_on_another_rank_raises_on_every_rank(two_ranks):
    _assert_all_ok(two_ranks, "pickles")
    assert all(len(r["pickles"]) == 4 for r in two_ranks)


def test_a_module_pickled_in_a_larger_world_raises(two_ranks, two_ranks_dir):
    """Rank 1's module of a two-rank world loaded in a one-rank world: a ValueError naming the
    rank and world it was built for (its collectives would fail, sized for two ranks)."""
    if dist.is_initialized():
        pytest.skip("a default process group is already set up in this process")
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        m = torch.load(two_ranks_dir / "ep-rank1.pt", weights_only=False)
        with pytest.raises(ValueError, match=r"\(size 1\), the rank and group size its module was built for: "
                                             r"rank 0: rank 1 of 2 \(experts \[2, 4\)\)"):
            m(torch.randn(3, H), torch.tensor([0, 3, 3]), torch.rand(3))
    finally:
        dist.destroy_process_group()


def test_a_state_dict_loads_only_into_the_rank_that_saved_it(two_ranks):
    _assert_all_ok(two_ranks, "state_dicts")
    assert all(len(r["state_dicts"]) == 9 for r in two_ranks)


def test_a_gradient_penalty_equals_one_module_holding_all_experts(two_ranks):
    _assert_all_ok(two_ranks, "second_order")
    assert all(sorted(r["second_order"]) == sorted(c["name"] for c in CASES_SECOND_ORDER) for r in two_ranks)


def test_two_ranks_equal_one_module_holding_all_experts(two_ranks):
    _assert_all_ok(two_ranks, "cases2")
    assert sorted(two_ranks[1]["cases2"]) == sorted(c["name"] for c in CASES_2)


@pytest.mark.skipif(HAS_CUDA, reason="CPU interpreter sweeps (fake timer)")
def test_tune_leaves_every_rank_with_rank_0s_entries(two_ranks):
    tune = [r["tune"] for r in two_ranks]
    # Rank 0 had key T8 covered, so only T16 was swept, by rank 0 (one key per rank in turn).
    assert tune[0]["swept"] == [k for k in tune[0]["expected"] if k.endswith("-T16-swiglu-s4")]
    assert tune[1]["swept"] == []
    for r in tune:
        assert r["entries"] == r["expected"] == tune[0]["expected"], r
        # The same path on every rank: the fused config for T16, the compose route for T8.
        assert r["routes"] == r["expected_routes"] == tune[0]["expected_routes"], r


def test_ranks_that_differ_in_probs_or_experts_dtype_pair_their_collectives(short_timeout_ranks):
    """Mismatched collectives would abort gloo (probs: unequal byte counts) or leave the ranks
    in different collectives until the timeout (experts: the module check run by one rank)."""
    _assert_all_ok(short_timeout_ranks, "dtypes")
    assert all(len(r["dtypes"]) == 3 for r in short_timeout_ranks)


def test_setting_the_process_group_in_use_on_one_rank_changes_nothing(short_timeout_ranks):
    _assert_all_ok(short_timeout_ranks, "regroup")
    assert all(len(r["regroup"]) == 2 for r in short_timeout_ranks)


def test_four_ranks_and_two_process_groups_of_two_equal_one_module(tmp_path):
    reports = _spawn(tmp_path, 4, "gloo", ["cases4", "pairs"])
    _assert_all_ok(reports, "cases4")
    _assert_all_ok(reports, "pairs")
    for report in reports:      # every case ran on every rank (an empty section would pass above)
        assert sorted(report["cases4"]) == sorted(c["name"] for c in CASES_4)
        assert sorted(report["pairs"]) == sorted(c["name"] for c in CASES_PAIRS)


def test_module_needs_an_initialized_process_group():
    assert not dist.is_initialized()
    with pytest.raises(RuntimeError, match="init_process_group"):
        ExpertParallelGLUMLP(2, H, F, glu_interleave=4)
    # a bad argument is named first, and as this module's (bias was GroupedGLUMLP's, checked
    # after the process group: without one the user saw the group's error)
    with pytest.raises(TypeError, match="ExpertParallelGLUMLP: bias must be a bool, got str"):
        ExpertParallelGLUMLP(2, H, F, glu_interleave=4, bias="yes")


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU (NCCL)")
def test_a_dispatch_synchronizes_the_host_once(tmp_path, monkeypatch):
    """plan_dispatch's one host synchronization is the split sizes' copy to the host; the
    flags sent with the counts reach the device without one (a tensor made from a Python list
    is a blocking copy from pageable memory)."""
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "0")
    (report,) = _spawn(tmp_path, 1, "nccl", ["syncs"], timeout_s=180)
    assert len(report["syncs"]) == 1, report["syncs"]


@pytest.mark.gpu
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 CUDA GPUs (NCCL)")
def test_nccl_two_gpus_equal_one_module_holding_all_experts(tmp_path, monkeypatch):
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "0")     # NVLink multicast off (the device machines' rule)
    reports = _spawn(tmp_path, 2, "nccl", ["arguments", "gpu"], timeout_s=420)
    _assert_all_ok(reports, "arguments")
    _assert_all_ok(reports, "gpu")


def test_from_grouped_keeps_requires_grad_and_train_state():
    """Frozen experts stay frozen and an eval-mode module stays in eval mode when sharded
    (a one-rank gloo group in this process; the values are checked by the spawned cases)."""
    if dist.is_initialized():
        pytest.skip("a default process group is already set up in this process")
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        full = GroupedGLUMLP(E2, H, F, glu_interleave=4, bias=True).eval()
        full.fc1_weight.requires_grad_(False)
        ep = ExpertParallelGLUMLP.from_grouped(full)
        assert not ep.training and not ep.experts.training
        frozen = {name: p.requires_grad for name, p in ep.experts.named_parameters()}
        assert frozen == {name: p.requires_grad for name, p in full.named_parameters()}
        assert frozen["fc1_weight"] is False and frozen["fc2_weight"] is True
        assert ExpertParallelGLUMLP.from_grouped(full.train()).training
    finally:
        dist.destroy_process_group()


def test_a_module_pickles_without_its_process_group(tmp_path):
    """torch.save / torch.load of a model holding the module (a communicator cannot be
    pickled): the copy runs on the loading process's world and gives the original's output;
    one built on another group raises until its process_group is set."""
    if dist.is_initialized():
        pytest.skip("a default process group is already set up in this process")
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        torch.manual_seed(5)
        ep = ExpertParallelGLUMLP(E2, H, F, glu_interleave=4)
        model = torch.nn.Sequential(ep)
        torch.save(model, tmp_path / "m.pt")
        loaded = torch.load(tmp_path / "m.pt", weights_only=False)
        x, ids, probs = torch.randn(5, H), torch.tensor([0, 3, 1, 1, 2]), torch.rand(5)
        assert loaded[0].process_group is dist.group.WORLD
        assert torch.equal(loaded[0](x, ids, probs), ep(x, ids, probs))
        sub = ExpertParallelGLUMLP(E2, H, F, glu_interleave=4, process_group=dist.new_group([0]))
        torch.save(sub, tmp_path / "sub.pt")
        other = torch.load(tmp_path / "sub.pt", weights_only=False)
        with pytest.raises(ValueError, match="unpickled from one built on a process group other than the world"):
            other(x, ids, probs)
        other.process_group = dist.group.WORLD
        assert torch.equal(other(x, ids, probs), sub(x, ids, probs))
    finally:
        dist.destroy_process_group()
