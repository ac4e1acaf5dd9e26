"""tilefuse.nn.HFGroupedGLUExperts / convert_hf_moe_experts: Hugging Face's experts modules
(Qwen3-MoE, Mixtral) run through grouped_glu_mlp, against the HF module's own output and
gradients. Tiny models are built from configs (no download); the tests that need transformers
skip without it, and an HF-shaped stand-in (the same eager loop, copied from transformers 5.24)
runs either way.

Tolerance (fp32): both sides run fp32 GEMMs with K <= max(H, F) = 32 terms and sum K = 2 slots;
HF scales the down projection's output by the routing weight, grouped_glu_mlp scales its input
(equal in exact arithmetic): a few eps32 relative per entry. 1e-5 relative to the largest
entry (~20x the expected error) plus 1e-5 rtol.
"""

import copy
import subprocess
import sys

import pytest
import torch
from torch import nn

import tilefuse
from tilefuse import launches, tuning
from tilefuse.nn import GroupedGLUMLP, HFGroupedGLUExperts, convert_hf_moe_experts
from tilefuse.ops.grouped_glu_mlp import tune as gtune
from tilefuse.ops.grouped_glu_mlp.api import problem_for

E, H, F, K, T = 4, 32, 32, 2, 7


def close(got, want, k=1e-5):
    torch.testing.assert_close(got, want, rtol=k, atol=k * float(want.detach().abs().max()))


class StandInExperts(nn.Module):
    """The shape of transformers' use_experts_implementation experts (its attributes, with the
    decorator's defaults) and their eager forward, without transformers."""

    def __init__(self, num_experts=E, hidden=H, ffn=F, act=None, **flags):
        super().__init__()
        self.num_experts = num_experts
        self.gate_up_proj = nn.Parameter(torch.randn(num_experts, 2 * ffn, hidden) * hidden ** -0.5)
        self.down_proj = nn.Parameter(torch.randn(num_experts, hidden, ffn) * ffn ** -0.5)
        self.act_fn = act if act is not None else nn.SiLU()
        self.has_gate, self.has_bias, self.is_transposed, self.is_concatenated = True, False, False, True
        self.has_post_expert_norm, self._is_expert_parallel = False, False
        for key, value in flags.items():
            setattr(self, key, value)

    def forward(self, hidden_states, top_k_index, top_k_weights):
        final = torch.zeros_like(hidden_states)
        with torch.no_grad():
            mask = torch.nn.functional.one_hot(top_k_index, num_classes=self.num_experts + 1).permute(2, 1, 0)
            hit = torch.greater(mask.sum(dim=(-1, -2)), 0).nonzero()
        for e in hit:
            e = e[0]
            if e == self.num_experts:
                continue
            pos, tok = torch.where(mask[e])
            if self.is_concatenated:
                gate, up = nn.functional.linear(hidden_states[tok], self.gate_up_proj[e]).chunk(2, dim=-1)
            else:
                z = nn.functional.linear(hidden_states[tok], self.gate_up_proj[e])
                gate, up = z[..., ::2], z[..., 1::2]
            h = nn.functional.linear(self.act_fn(gate) * up, self.down_proj[e])
            final.index_add_(0, tok, (h * top_k_weights[tok, pos, None]).to(final.dtype))
        return final


def routing(n_tokens=T, n_experts=E, seed=0, dropped=False):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(n_tokens, n_experts, generator=g)
    weights, index = torch.softmax(logits, -1).topk(K, dim=-1)
    if dropped:   # expert-parallel marker: slots owned by another rank
        index[1, 0] = n_experts
        index[4, 1] = n_experts
    return torch.randn(n_tokens, H, generator=g), index, weights


def check_against(hf_experts, adapter, hidden, index, weights):
    """Forward and every gradient (hidden_states, top_k_weights, both weights) equal."""
    hidden = hidden.clone().requires_grad_(True)
    weights = weights.clone().requires_grad_(True)
    params = [hf_experts.gate_up_proj, hf_experts.down_proj]
    want = hf_experts(hidden, index, weights)
    got = adapter(hidden, index, weights)
    close(got, want)
    dy = torch.randn_like(want)
    grads_want = torch.autograd.grad(want, [hidden, weights] + params, dy)
    grads_got = torch.autograd.grad(got, [hidden, weights] + params, dy)
    for g, w in zip(grads_got, grads_want):
        close(g, w)


# --- the stand-in (runs without transformers) ---------------------------------------------------

@pytest.mark.parametrize("dropped", [False, True], ids=["all-kept", "ep-dropped-slots"])
@pytest.mark.parametrize("concatenated", [True, False], ids=["halves", "alternating"])
def test_adapter_matches_stand_in(concatenated, dropped):
    """from_hf of the halves layout; the alternating one (is_concatenated=False) is refused by
    from_hf (HF's default gate computes halves whatever the flag says) and built directly."""
    torch.manual_seed(0)
    experts = StandInExperts(is_concatenated=concatenated)
    if concatenated:
        adapter = HFGroupedGLUExperts.from_hf(experts)
    else:
        with pytest.raises(ValueError, match=r"is_concatenated=False \(supported: is_concatenated=True\)"):
            HFGroupedGLUExperts.from_hf(experts)
        adapter = HFGroupedGLUExperts(E, H, F, glu_layout="interleaved", glu_interleave=1, device="meta")
        adapter.gate_up_proj, adapter.down_proj = experts.gate_up_proj, experts.down_proj
    assert adapter.gate_up_proj is experts.gate_up_proj and adapter.down_proj is experts.down_proj
    assert adapter.glu_layout == ("halves" if concatenated else "interleaved")
    check_against(experts, adapter, *routing(dropped=dropped))


def test_from_hf_takes_the_silu_function_as_act_fn():
    """LFM2-MoE's experts hold the function F.silu as act_fn (not a module): plain SwiGLU,
    converted and equal to the experts' own forward."""
    torch.manual_seed(2)
    experts = StandInExperts(act=nn.functional.silu)
    adapter = HFGroupedGLUExperts.from_hf(experts)
    check_against(experts, adapter, *routing())


@pytest.mark.parametrize("extra", ["parameter", "buffer", "submodule", "silu-subclass"])
def test_from_hf_refuses_what_it_would_drop_or_miscompute(extra):
    """An extra parameter, buffer or submodule would leave the model's parameters, optimizer and
    checkpoints, and the computation; an nn.SiLU subclass may compute something else: each is
    refused, naming it, not converted."""
    experts = StandInExperts()
    if extra == "parameter":
        experts.expert_scale = nn.Parameter(torch.ones(E))
    elif extra == "buffer":
        experts.register_buffer("clamp_limit", torch.tensor(7.0))
    elif extra == "submodule":
        experts.extra_norm = nn.LayerNorm(H)
    else:
        class ClampedSiLU(nn.SiLU):
            def forward(self, x):
                return super().forward(x.clamp(-1, 1))
        experts.act_fn = ClampedSiLU()
    what = {"parameter": "parameter 'expert_scale'", "buffer": "buffer 'clamp_limit'",
            "submodule": "submodule 'extra_norm'", "silu-subclass": "act_fn is ClampedSiLU"}[extra]
    with pytest.raises(ValueError, match=what):
        HFGroupedGLUExperts.from_hf(experts)


@pytest.mark.skipif(torch.cuda.is_available(), reason="CPU tensors run the kernels only in the interpreter")
def test_adapter_fused_kernels_in_the_interpreter(tuning_table):
    """With a tuning-table entry for the key, level 2 runs the fused Triton kernels (in the
    interpreter on CPU): one forward and one backward launch, the stand-in's result."""
    torch.manual_seed(1)
    experts = StandInExperts()
    adapter = HFGroupedGLUExperts.from_hf(experts)
    hidden, index, weights = routing(seed=1)
    problem = problem_for(hidden.new_empty(T * K, H), experts.down_proj, "swiglu", None, False)
    tuning.register("grouped_glu_mlp", {problem: gtune.candidates_for(problem)[0]})
    with tilefuse.level(2), launches.counting() as launched:
        check_against(experts, adapter, hidden, index, weights)
    assert launched["grouped_mlp_fwd"] == 1 and launched["grouped_mlp_bwd"] == 1


def test_adapter_compiles_fullgraph_and_runs_empty():
    torch.manual_seed(2)
    experts = StandInExperts()
    adapter = HFGroupedGLUExperts.from_hf(experts)
    hidden, index, weights = routing(seed=2)
    compiled = torch.compile(adapter, fullgraph=True, backend="aot_eager")
    close(compiled(hidden, index, weights), experts(hidden, index, weights))
    out = adapter(hidden[:0], index[:0], weights[:0])
    assert out.shape == (0, H)


@pytest.mark.parametrize("flags,match", [
    ({"has_bias": True}, "has_bias=True"),
    ({"is_transposed": True}, "is_transposed=True"),
    ({"has_gate": False}, "has_gate=False"),
    ({"has_post_expert_norm": True}, "has_post_expert_norm=True"),
    ({"act": nn.GELU()}, "act_fn is GELU"),
], ids=lambda v: v if isinstance(v, str) else None)
def test_unsupported_experts_are_refused_by_name(flags, match):
    model = nn.ModuleDict({"mlp": nn.ModuleDict({"experts": StandInExperts(**flags)})})
    with pytest.raises(ValueError, match=f"mlp.experts .*{match}"):
        convert_hf_moe_experts(model)
    assert isinstance(model["mlp"]["experts"], StandInExperts)   # nothing replaced


def test_convert_refuses_a_model_without_experts_and_bad_routing():
    with pytest.raises(ValueError, match="holds no Hugging Face experts module"):
        convert_hf_moe_experts(nn.Sequential(nn.Linear(4, 4)))
    adapter = HFGroupedGLUExperts.from_hf(StandInExperts())
    hidden, index, weights = routing()
    for args, exc, match in [((hidden[:, :8], index, weights), ValueError, "hidden_states must be"),
                             ((hidden.long(), index, weights), TypeError, "hidden_states must be a float tensor"),
                             ((hidden.bool(), index, weights), TypeError, "hidden_states must be a float tensor"),
                             ((hidden, index.float(), weights), TypeError, "top_k_index must be int"),
                             ((hidden, index[:3], weights), ValueError, "top_k_index must be"),
                             ((hidden, index, weights[:, :1]), ValueError, "top_k_weights must have")]:
        with pytest.raises(exc, match=match):
            adapter(*args)
    with pytest.raises(RuntimeError, match=r"top_k_index must be in \[0, E\]"):
        adapter(hidden, index - 1, weights)
    past = index.clone()
    past[2, 0] = adapter.num_experts + 1   # E + 1: a routing bug, not a dropped slot
    with pytest.raises(RuntimeError, match=r"top_k_index must be in \[0, E\]"):
        adapter(hidden, past, weights)


def test_convert_refuses_experts_whose_dtype_the_op_does_not_take():
    """A float64 model is refused by name at conversion, not at its first forward (where the
    op's error would name x, an argument the user never passed)."""
    experts = StandInExperts().double()
    with pytest.raises(ValueError, match=r"experts \(StandInExperts\) is not supported: its parameters are "
                                         r"torch.float64"):
        HFGroupedGLUExperts.from_hf(experts)


def test_adapter_refuses_a_dtype_the_op_does_not_take():
    for dtype in (torch.int64, torch.float64, "bf16"):
        with pytest.raises(TypeError, match="HFGroupedGLUExperts: dtype must be None or one of"):
            HFGroupedGLUExperts(2, 8, 16, dtype=dtype)
    assert HFGroupedGLUExperts(2, 8, 16, dtype=torch.bfloat16, device="meta").down_proj.dtype == torch.bfloat16


def test_tilefuse_import_does_not_import_transformers():
    code = "import sys, tilefuse, tilefuse.nn.hf; assert 'transformers' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_hf_weights_into_grouped_glu_mlp_need_the_halves_layout():
    """The issue's path: HF's gate_up_proj copied into GroupedGLUMLP. A module reading
    interleaved rows in blocks other than F (a wrong result, max |diff| ~1, if loaded; blocks
    of F are the halves layout) raises on a strict load of the weights without the layout record
    (after torch copied them in, as for any missing key) and refuses those with a record of
    another layout (keeping its own); glu_layout="halves" matches."""
    torch.manual_seed(3)
    experts = StandInExperts()
    state = {"fc1_weight": experts.gate_up_proj.detach(), "fc2_weight": experts.down_proj.detach()}
    missing = GroupedGLUMLP(E, H, F, glu_interleave=8)
    with pytest.warns(UserWarning, match="no 'glu_layout'"), pytest.raises(RuntimeError, match="glu_layout"):
        missing.load_state_dict(state)
    assert torch.equal(missing.fc1_weight, state["fc1_weight"])     # copied in before the error (documented)
    other = GroupedGLUMLP(E, H, F, glu_interleave=8)
    before = other.fc1_weight.detach().clone()
    with pytest.raises(RuntimeError, match="saved with its GLU rows halves .*glu_layout='halves'"):
        other.load_state_dict({**state, "glu_layout": torch.tensor(0)})
    assert torch.equal(other.fc1_weight, before)                     # another layout's: kept its own
    mlp = GroupedGLUMLP(E, H, F, glu_layout="halves")
    mlp.load_state_dict({**state, "glu_layout": torch.tensor(0)})
    hidden, index, weights = routing(seed=3)
    adapter = HFGroupedGLUExperts.from_hf(experts)
    # the adapter's permutation by hand, then the module
    ids, order = torch.sort(index.reshape(-1), stable=True)
    counts = torch.bincount(ids, minlength=E)
    y = mlp(hidden[order // K], counts, weights.reshape(-1)[order])
    out = torch.zeros_like(hidden).index_add_(0, order // K, y)
    close(out, experts(hidden, index, weights))
    close(adapter(hidden, index, weights), out)


# --- transformers' own models -------------------------------------------------------------------

def _tiny(family):
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    common = dict(vocab_size=64, hidden_size=H, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                  num_experts_per_tok=K, max_position_embeddings=64)
    if family == "qwen3_moe":
        config = transformers.Qwen3MoeConfig(intermediate_size=64, moe_intermediate_size=F, num_experts=E,
                                             decoder_sparse_step=1, norm_topk_prob=True, **common)
        model = transformers.Qwen3MoeForCausalLM(config)
    else:
        config = transformers.MixtralConfig(intermediate_size=F, num_local_experts=E, **common)
        model = transformers.MixtralForCausalLM(config)
    with torch.no_grad():   # HF's init (std 0.02) makes tiny experts outputs: larger, and a router
        for p in model.parameters():
            p.normal_(0, 0.3)
    return model.float().train()


@pytest.mark.parametrize("implementation", ["eager", "grouped_mm"])
@pytest.mark.parametrize("family", ["qwen3_moe", "mixtral"])
def test_hf_experts_module_forward_and_gradients(family, implementation):
    """Against HF's eager loop and its grouped_mm path (transformers 5.24's default)."""
    model = _tiny(family)
    moe = model.model.layers[0].mlp
    moe.experts.config._experts_implementation = implementation
    hidden = torch.randn(T, H)
    _, weights, index = moe.gate(hidden)
    index, weights = index.detach().clone(), weights.detach()
    check_against(moe.experts, HFGroupedGLUExperts.from_hf(moe.experts), hidden, index, weights)
    # An expert-parallel dropped slot (id E): HF skips it (its grouped_mm path only when the
    # module is marked expert-parallel, as HF's EP sharding does). Older transformers (the GPU
    # image's, 2026-12-01) have eager loops that one-hot the ids into E classes and refuse E.
    transformers = pytest.importorskip("transformers")
    if implementation == "eager" and tuple(int(v) for v in transformers.__version__.split(".")[:2]) < (5, 24):
        pytest.skip(f"the eager dropped-slot half needs transformers >= 5.24 (the pinned test dependency), "
                    f"installed {transformers.__version__}")
    index[2, 1] = E
    moe.experts._is_expert_parallel = True
    check_against(moe.experts, HFGroupedGLUExperts.from_hf(moe.experts), hidden, index, weights)


@pytest.mark.parametrize("family", ["qwen3_moe", "mixtral"])
def test_convert_hf_model_in_place(family, caplog):
    model = _tiny(family)
    converted = copy.deepcopy(model)
    keys = list(converted.state_dict())
    with caplog.at_level("INFO", logger="tilefuse.nn"):
        assert convert_hf_moe_experts(converted) is converted
    assert "replaced 2 experts module(s)" in caplog.text
    assert all(isinstance(layer.mlp.experts, HFGroupedGLUExperts) for layer in converted.model.layers)
    assert list(converted.state_dict()) == keys     # HF's keys: save_pretrained / load as before
    ids = torch.randint(0, 64, (2, 5))
    out_hf, out_tf = model(ids, labels=ids), converted(ids, labels=ids)
    close(out_tf.logits, out_hf.logits)
    out_hf.loss.backward()
    out_tf.loss.backward()
    for (name, p_hf), p_tf in zip(model.named_parameters(), converted.parameters()):
        close(p_tf.grad, p_hf.grad, k=1e-4)


def test_hf_activation_other_than_silu_is_refused():
    transformers = pytest.importorskip("transformers")
    config = transformers.Qwen3MoeConfig(vocab_size=64, hidden_size=H, intermediate_size=64, moe_intermediate_size=F,
                                         num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
                                         num_experts=E, num_experts_per_tok=K, hidden_act="gelu")
    with pytest.raises(ValueError, match="model.layers.0.mlp.experts .*act_fn is GELUActivation"):
        convert_hf_moe_experts(transformers.Qwen3MoeForCausalLM(config))


@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
def test_the_adapter_keeps_the_experts_train_or_eval_state(training):
    experts = StandInExperts().train(training)
    assert HFGroupedGLUExperts.from_hf(experts).training is training


@pytest.mark.parametrize("overflows", ["gate_up_proj", "down_proj"], ids=["fc1-forward", "fc2-backward"])
def test_dropped_slots_stay_finite_where_the_last_expert_overflows(overflows):
    """fp16, no recipe: dropped slots (id E) join the last expert, here one that overflows on
    their rows, in fc1 (forward) or in dy @ fc2 (backward: sum(x) * 4000 and 32 * 4000 exceed
    fp16's 65504). The output and every gradient are bitwise those with a harmless last expert,
    which has no kept slot, and HF, skipping the slots, stays finite: weight 0 alone left
    0 * inf = NaN in the token's sum, or in the last expert's fc1 gradient and the tokens' dx."""
    torch.manual_seed(0)
    n_experts = 2
    experts = StandInExperts(n_experts).half()
    adapter = HFGroupedGLUExperts.from_hf(experts)
    x = torch.rand(4, H, dtype=torch.float16) + 0.5          # positive rows: their sum is > 16
    index = torch.tensor([[0, n_experts], [0, n_experts], [0, 0], [n_experts, 0]])
    weights, dy = torch.rand(4, K), torch.ones(4, H, dtype=torch.float16)

    def run(module):
        module.zero_grad()
        xg, wg = x.clone().requires_grad_(True), weights.clone().requires_grad_(True)
        out = module(xg, index, wg)
        out.backward(dy)
        return [out.detach(), xg.grad, wg.grad, module.gate_up_proj.grad.clone(), module.down_proj.grad.clone()]
    want = run(adapter)
    with torch.no_grad():
        getattr(experts, overflows)[n_experts - 1].fill_(4000)
    got = run(adapter)
    for name, g, w in zip(["out", "dx", "dweights", "dgate_up_proj", "ddown_proj"], got, want):
        assert torch.equal(g, w), name
    assert not got[3][-1].any() and not got[4][-1].any()
    assert all(t.isfinite().all() for t in run(experts))


@pytest.mark.parametrize("recipe", ["fp8_block", "nvfp4"])
def test_dropped_slots_do_not_reach_a_recipes_quantizers(recipe):
    """A token whose slots are all dropped (id E: another rank's experts), with large values in
    x and in its incoming gradient, leaves the other tokens' outputs and every weight gradient
    as they were: under nvfp4 its x set the per-tensor amax, under fp8_block its x and dy the
    last expert's column-wise block scales."""
    import tilefuse
    torch.manual_seed(0)
    n_experts, hidden, ffn, top_k, n_tokens = 2, 128, 128, 2, 12
    adapter = HFGroupedGLUExperts(n_experts, hidden, ffn, recipe=recipe, dtype=torch.bfloat16)
    with torch.no_grad():
        adapter.gate_up_proj.normal_(0, 0.09)
        adapter.down_proj.normal_(0, 0.09)
    x = torch.randn(n_tokens, hidden, dtype=torch.bfloat16)
    index, weights = torch.randint(0, n_experts, (n_tokens, top_k)), torch.rand(n_tokens, top_k)
    dy = torch.randn(n_tokens, hidden, dtype=torch.bfloat16)

    def run(x, index, weights, dy):
        adapter.zero_grad()
        with tilefuse.level(1):
            out = adapter(x, index, weights)
        out.backward(dy)
        return out.detach(), adapter.gate_up_proj.grad.clone(), adapter.down_proj.grad.clone()
    want = run(x, index, weights, dy)
    big = 50 * torch.randn(1, hidden, dtype=torch.bfloat16)
    got = run(torch.cat([x, big]), torch.cat([index, torch.full((1, top_k), n_experts)]),
              torch.cat([weights, torch.rand(1, top_k)]), torch.cat([dy, big]))
    assert torch.equal(got[0][:n_tokens], want[0]) and not got[0][n_tokens].any()
    assert torch.equal(got[1], want[1]) and torch.equal(got[2], want[2])
