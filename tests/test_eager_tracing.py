"""Eager traces (policy.eager_tracing): make_fx in its real tracing mode and torch.jit.trace
record the torch ops a call runs, and a kernel's launch is not one, so a traced graph would hold
the output's allocation and not the kernel's writes (on a GPU it returned uninitialised memory;
in the interpreter the launch raised on the proxy's storage). Every op takes its plain-PyTorch
path while such a trace records: nothing launches, and the graph gives level 0's result on new
inputs (a recipe's plain-PyTorch rendering too: nvfp4's launched its weights' amax kernel)."""

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

import tilefuse
from tilefuse import launches, policy
from tilefuse.ops.grouped_glu_mlp.reference import random_inputs

from test_so2_api import make_args


def _dyt_case(device):
    g = torch.Generator().manual_seed(0)
    a = torch.tensor([0.5]).to(device)
    w, b = (torch.randn(16, generator=g).to(device) for _ in range(2))
    return (lambda x: tilefuse.dyt(x, a, w, b)), lambda: torch.randn(8, 16, generator=g).to(device)


def _so2_case(device):
    u0, alpha, w0, w1, gw = make_args(device=device)
    return (lambda u: tilefuse.so2_mixing_stack(u, alpha, w0, w1, gw, lmax=2, focus_dim=4)), \
        lambda: torch.randn(u0.shape).to(device)


def _grouped_case(device):
    i = random_inputs([5, 0, 7], 32, 32, torch.float32, bias=True, device=device,
                      generator=torch.Generator().manual_seed(1))
    return (lambda x: tilefuse.grouped_glu_mlp(x, i["counts"], i["probs"], i["w1"], i["w2"], fc1_bias=i["b1"],
                                               fc2_bias=i["b2"])), lambda: torch.randn(i["x"].shape).to(device)


def _quant_case(device):
    return (lambda x: tilefuse.quant.quantize_mxfp8(x).data.view(torch.uint8)), \
        lambda: torch.randn(4, 64).to(device)


def _recipe_case(recipe):
    def case(device):
        i = random_inputs([5, 0, 7], 32, 32, torch.float32, bias=False, device=device,
                          generator=torch.Generator().manual_seed(2))
        return (lambda x: tilefuse.grouped_glu_mlp(x, i["counts"], i["probs"], i["w1"], i["w2"], recipe=recipe)), \
            lambda: torch.randn(i["x"].shape).to(device)
    return case


CASES = {"dyt": _dyt_case, "so2_mixing_stack": _so2_case, "grouped_glu_mlp": _grouped_case,
         "grouped_glu_mlp mxfp8": _recipe_case("mxfp8"), "grouped_glu_mlp nvfp4": _recipe_case("nvfp4"),
         "quant": _quant_case}


@pytest.mark.parametrize("op", CASES)
def test_a_real_make_fx_trace_records_the_plain_pytorch_path(op, device):
    fn, new_input = CASES[op](device)
    x = new_input()
    fn(x)   # a plan for the key exists already: the trace must not take it
    with launches.counting() as launched:
        graph = make_fx(fn)(x)
        assert policy.kernels_enabled(x.device) and not policy.eager_tracing()   # only while it records
    assert not launched
    x2 = new_input()
    with tilefuse.level(0):
        want = fn(x2)
    assert torch.equal(graph(x2), want)


@pytest.mark.parametrize("op", ["dyt", "so2_mixing_stack", "grouped_glu_mlp"])
def test_torch_jit_trace_records_the_plain_pytorch_path(op, device):
    """torch.jit.trace of each op's call: under it sizes are traced tensors. Before, dyt's plan
    lookup raised a TypeError naming no argument of the caller's, and grouped_glu_mlp's route
    key an AttributeError (a tensor has no bit_length). The trace records level 0's path; the
    JIT's replay of it may round differently (so2 within 1e-6), hence a tolerance, which a
    graph returning uninitialised memory still fails. (The quantized recipes and the quant
    API cannot be traced: torch's tracer takes no dtype views, README.)"""
    fn, new_input = CASES[op](device)
    x = new_input()
    with launches.counting() as launched:
        traced = torch.jit.trace(fn, x, check_trace=False)   # (its check re-runs fn untraced)
    assert not launched
    x2 = new_input()
    with tilefuse.level(0):
        want = fn(x2)
    torch.testing.assert_close(traced(x2), want)
