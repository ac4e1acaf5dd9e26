"""torch.fx.symbolic_trace of models holding tilefuse's modules or calling its ops: each op is
one leaf node of the graph (utils.fx_node), and the GraphModule runs the op, checks, routing
and kernels included, as the model does. Before, tracing went into the ops with proxies: DyT
branched on a proxy (TraceError) and the other ops refused it (TypeError), so a model whose
LayerNorms convert_layernorm_to_dyt replaced could no longer be FX-traced."""

import pytest
import torch
import torch.fx

import tilefuse
from tilefuse.nn import DyT, GroupedGLUMLP, SO2MixingStack
from tilefuse.ops.grouped_glu_mlp.reference import random_inputs


def _trace_and_compare(model, *inputs, op, concrete_args=None):
    gm = torch.fx.symbolic_trace(model, concrete_args=concrete_args)
    leaves = [n for n in gm.graph.nodes if n.op == "call_function" and n.target is op]
    assert len(leaves) == 1, gm.code
    want = model(*inputs)
    assert torch.equal(gm(*inputs), want)
    return gm


class _Block(torch.nn.Module):
    def __init__(self, channels_last):
        super().__init__()
        self.channels_last = channels_last
        self.lin = torch.nn.Linear(16, 16)
        self.norm = DyT(16, channels_last=channels_last)

    def forward(self, x):
        h = self.lin(x) if self.channels_last else x
        return self.norm(h) + x


@pytest.mark.parametrize("channels_last", [True, False])
def test_a_model_with_dyt_traces_to_one_dyt_node(channels_last, device):
    model = _Block(channels_last).to(device)
    x = torch.randn((3, 5, 16) if channels_last else (2, 16, 3, 3), device=device)
    _trace_and_compare(model, x, op=tilefuse.dyt)


class _Functional(torch.nn.Module):
    """A user's module calling the functional op on its own parameters."""

    def __init__(self):
        super().__init__()
        self.alpha = torch.nn.Parameter(torch.tensor([0.5]))
        self.weight = torch.nn.Parameter(torch.randn(16))

    def forward(self, x):
        return tilefuse.dyt(x * 2, self.alpha, self.weight)


def test_the_functional_op_in_a_user_module_is_one_node(device):
    model = _Functional().to(device)
    gm = _trace_and_compare(model, torch.randn(4, 16, device=device), op=tilefuse.dyt)
    x = torch.randn(4, 16, device=device, requires_grad=True)   # and the GraphModule differentiates
    gm(x).sum().backward()
    assert x.grad is not None and model.weight.grad is not None


@pytest.mark.parametrize("apply_alpha", [True, False])
def test_a_model_with_so2_mixing_stack_traces_to_one_node(apply_alpha, device):
    torch.manual_seed(0)
    model = SO2MixingStack(lmax=2, focus_dim=4, n_focus=2, n_layers=2, apply_alpha=apply_alpha).to(device)
    u0 = torch.randn(2, 5, 28, device=device)
    args = (u0, torch.rand(5, 2, device=device) + 0.2) if apply_alpha else (u0,)
    # without alpha, FX's usual concrete_args for an optional argument left out (else it is a
    # placeholder, which is never None while tracing)
    _trace_and_compare(model, *args, op=tilefuse.so2_mixing_stack,
                       concrete_args=None if apply_alpha else {"alpha": None})


def test_a_model_with_grouped_glu_mlp_traces_to_one_node(device):
    torch.manual_seed(0)
    model = GroupedGLUMLP(3, 32, 32, glu_interleave=16, bias=True).to(device)
    i = random_inputs([5, 0, 7], 32, 32, torch.float32, bias=False, device=device,
                      generator=torch.Generator().manual_seed(1))
    _trace_and_compare(model, i["x"], i["counts"], i["probs"], op=tilefuse.grouped_glu_mlp)


class _Holder(torch.nn.Module):
    """A user's model holding a module whose forward cannot be traced (host-side routing)."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x, ids, weights):
        return self.inner(x * 2, ids, weights) + 1


def _leaf_and_compare(model, inputs, other_inputs):
    """One call_module node for model.inner, and the GraphModule gives the model's output on
    the traced inputs and on another routing and token count."""
    gm = torch.fx.symbolic_trace(model)
    leaves = [n for n in gm.graph.nodes if n.op == "call_module"]
    assert [n.target for n in leaves] == ["inner"], gm.code
    for args in (inputs, other_inputs):
        assert torch.equal(gm(*args), model(*args))
    return gm


def test_a_model_with_the_hf_adapter_traces_to_one_module_node(device):
    """HFGroupedGLUExperts' forward unpacks the routing's shape and sorts it: it is one leaf
    (utils.fx_module_node). Before, tracing raised 'hidden_states must be a torch.Tensor, got
    Proxy'. As the trace's root it cannot be a leaf: a TypeError saying so."""
    from tilefuse.nn import HFGroupedGLUExperts
    torch.manual_seed(0)
    adapter = HFGroupedGLUExperts(4, 16, 32, dtype=torch.float32, device=device)
    with torch.no_grad():
        adapter.gate_up_proj.normal_()
        adapter.down_proj.normal_()

    def inputs(T):   # ids in [0, E]: E marks a dropped slot
        return (torch.randn(T, 16, device=device), torch.randint(0, 5, (T, 2), device=device),
                torch.rand(T, 2, device=device))
    _leaf_and_compare(_Holder(adapter), inputs(6), inputs(9))
    with pytest.raises(TypeError, match="HFGroupedGLUExperts: torch.fx.symbolic_trace cannot trace this module as "
                                        "the root"):
        torch.fx.symbolic_trace(adapter)


@pytest.fixture
def one_rank_group():
    import torch.distributed as dist
    if dist.is_initialized():
        pytest.skip("a default process group is already set up in this process")
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def test_a_model_with_expert_parallel_traces_to_one_module_node(one_rank_group):
    """ExpertParallelGLUMLP (a one-rank gloo group): its all-to-alls' sizes are host values
    of the routing, so it is one leaf node, and the GraphModule routes each call's tokens
    anew. Before, tracing raised 'x must be a torch.Tensor, got Proxy'; as the root: a
    TypeError saying why."""
    from tilefuse.nn import ExpertParallelGLUMLP
    torch.manual_seed(0)
    ep = ExpertParallelGLUMLP(4, 16, 32, dtype=torch.float32)

    def inputs(T):
        return torch.randn(T, 16), torch.randint(0, 4, (T,)), torch.rand(T)
    gm = _leaf_and_compare(_Holder(ep), inputs(12), inputs(7))
    x = torch.randn(5, 16, requires_grad=True)   # and the GraphModule differentiates
    gm(x, torch.tensor([3, 0, 0, 2, 3]), torch.rand(5)).sum().backward()
    assert x.grad is not None and ep.experts.fc1_weight.grad is not None
    with pytest.raises(TypeError, match="ExpertParallelGLUMLP: torch.fx.symbolic_trace cannot trace this module"):
        torch.fx.symbolic_trace(ep)


def test_expert_parallel_refuses_an_eager_trace_by_name(one_rank_group):
    """torch.jit.trace / make_fx would hold the all-to-alls' split sizes of the traced
    routing as constants (wrong for any other routing): NotImplementedError naming the module
    and what to do. Before, they failed inside torch.distributed with an error naming neither."""
    from torch.fx.experimental.proxy_tensor import make_fx
    from tilefuse.nn import ExpertParallelGLUMLP
    ep = ExpertParallelGLUMLP(4, 16, 32, dtype=torch.float32)
    args = (torch.randn(6, 16), torch.randint(0, 4, (6,)), torch.rand(6))
    for trace in (lambda: torch.jit.trace(ep, args, check_trace=False), lambda: make_fx(ep)(*args)):
        with pytest.raises(NotImplementedError, match="ExpertParallelGLUMLP: torch.jit.trace and make_fx cannot "
                                                      "record this module"):
            trace()
    assert ep(*args).shape == (6, 16)   # and it runs eagerly after
