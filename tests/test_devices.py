"""Calls on tensors of a CUDA device other than the current one (device.on_tensor_device).

tilefuse's kernels launch on the current CUDA device and its current stream (Triton's JIT and
triton_common's launchers), torch's ops on their tensors' device; so each public entry point
makes its tensors' device current for the call. Without that a call on cuda:1 under cuda:0
launched cuda:0 kernels on cuda:1 memory (an illegal address, or unordered with cuda:1's ops).
The two-device tests need two GPUs; the rest runs anywhere.
"""

import inspect
import re

import pytest
import torch

import tilefuse
from tilefuse import device as tf_device

TWO_GPUS = torch.cuda.is_available() and torch.cuda.device_count() >= 2


def test_other_cuda_device_is_none_off_cuda():
    assert tf_device.other_cuda_device(torch.ones(2)) is None
    assert tf_device.other_cuda_device(torch.ones(2, device="meta")) is None
    assert tf_device.other_cuda_device([1.0]) is None and tf_device.other_cuda_device(None) is None


@pytest.mark.skipif(torch.cuda.is_available(), reason="fake CUDA tensors in a process without CUDA")
def test_fake_cuda_tensors_without_cuda_go_as_plain_pytorch_goes():
    """Fake CUDA tensors (FakeTensorMode(device "cuda"), as memory estimators make them) in a
    process without CUDA (a CPU-only build here) have no device to make current: the device
    queries (other_cuda_device, dyt's plan key) asked CUDA for its current device, which
    raised "Torch not compiled with CUDA enabled". dyt gives a fake result as its plain-PyTorch
    formula does, at every level (at level 2 its plan's reference copied into the kernels'
    output layout, and this build refuses copy_ on fake CUDA tensors; a backward is not tried:
    autograd aborts the process on fake CUDA tensors in this build, in plain PyTorch too);
    so2_mixing_stack and grouped_glu_mlp get as
    far as their references, whose indexing this build's PyTorch refuses on fake CUDA tensors
    as it does in plain PyTorch."""
    from torch._subclasses.fake_tensor import FakeTensorMode, is_fake
    from tilefuse.ops.dyt import plan as dyt_plan
    from tilefuse.ops.grouped_glu_mlp.reference import random_inputs
    from test_so2_kernels import make

    so2 = make(1, 1, 16, 37, "cpu")[1]
    g = random_inputs(torch.tensor([5, 0, 11]), 32, 32, torch.bfloat16, bias=True, device="cpu")
    grouped = [g[k] for k in ("x", "counts", "probs", "w1", "w2", "b1", "b2")]
    with FakeTensorMode():
        def fake(t):
            return None if t is None else torch.empty(t.shape, dtype=t.dtype, device="cuda")

        x = torch.empty(4, 32, device="cuda")
        assert tf_device.other_cuda_device(x) is None and dyt_plan._aux(x) == 0
        doubled = tf_device.on_tensor_device(lambda t: t * 2)(x)
        assert is_fake(doubled) and doubled.device == x.device
        for dtype, level in ((torch.float32, 0), (torch.float64, 2), (torch.float32, 2), (torch.bfloat16, 2)):
            x, a, w = (torch.empty(*shape, dtype=dtype, device="cuda") for shape in ((4, 32), (1,), (32,)))
            with tilefuse.level(level):
                y = tilefuse.dyt(x, a, w)
            want = torch.tanh(a * x) * w
            assert is_fake(y) and (y.shape, y.dtype, y.device) == (want.shape, want.dtype, want.device)
            with tilefuse.level(level):   # the plan's backward, as autograd would call it
                grads = dyt_plan.lookup(x, a, w, None, True).backward(torch.empty_like(y), x, a, w, None)
            for g, t in zip(grads, (x, a, w)):
                assert is_fake(g) and (g.shape, g.dtype, g.device) == (t.shape, t.dtype, t.device)
        so2, grouped = [fake(t) for t in so2], [fake(t) for t in grouped]
        for call in (lambda: tilefuse.so2_mixing_stack(*so2, lmax=1, focus_dim=16),
                     lambda: tilefuse.grouped_glu_mlp(*grouped[:5], fc1_bias=grouped[5], fc2_bias=grouped[6])):
            try:
                y = call()
            except RuntimeError as e:
                with pytest.raises(RuntimeError, match=re.escape(str(e))):
                    so2[0][0]
            else:
                assert is_fake(y) and y.device == x.device


def test_decorated_entry_points_keep_their_signature_and_docs():
    from tilefuse.ops.grouped_glu_mlp import api as grouped_api
    from tilefuse.ops.so2_mixing_stack import api as so2_api
    for fn, first in [(tilefuse.grouped_glu_mlp, "x"), (tilefuse.so2_mixing_stack, "u0"),
                      (tilefuse.quant.quantize_fp8_block, "x"), (tilefuse.quant.quantize_mxfp8, "x"),
                      (tilefuse.quant.quantize_nvfp4, "x")]:
        assert next(iter(inspect.signature(fn).parameters)) == first and fn.__doc__, fn
    assert grouped_api.grouped_glu_mlp.__wrapped__.__name__ == "grouped_glu_mlp"
    from tilefuse.ops.dyt import op as dyt_op   # the custom ops' implementations (api.dyt guards inline)
    assert dyt_op.forward_impl.__wrapped__.__name__ == "forward_impl"
    assert dyt_op.backward_impl.__wrapped__.__name__ == "backward_impl"
    assert so2_api.so2_mixing_stack.__wrapped__.__name__ == "so2_mixing_stack"


@pytest.fixture
def device_guard(monkeypatch):
    """Replaces torch.cuda.device by a guard that records the indices entered; calling the
    fixture's value installs it and returns that list."""
    def install():
        entered = []

        class Guard:
            def __init__(self, index):
                entered.append(index)

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                return False

        monkeypatch.setattr(torch.cuda, "device", Guard)
        return entered
    return install


def _custom_ops():
    """Every torch.library custom op of tilefuse (what a compiled graph runs)."""
    from tilefuse.ops.dyt import op as dyt_op
    from tilefuse.ops.grouped_glu_mlp import op as grouped_op
    from tilefuse.ops.so2_mixing_stack import op as so2_op
    found = [v for mod in (dyt_op, grouped_op, so2_op) for v in vars(mod).values()
             if isinstance(v, torch._library.custom_ops.CustomOpDef)]
    assert len(found) == 10, [op._name for op in found]
    return found


def test_every_custom_op_makes_its_tensors_device_current():
    """The custom ops run with their first tensor's CUDA device current, as the public calls
    do (device.custom_op_on_tensor_device; dyt's call its decorated implementations, test
    above)."""
    for op in _custom_ops():
        if not op._name.startswith("dyt"):
            assert op._init_fn.__wrapped__.__name__ == op._init_fn.__name__, op._name


def test_a_custom_op_on_another_device_enters_it(monkeypatch, device_guard):
    """torch.ops.tilefuse.so2_stack_fwd called on tensors of 'another' CUDA device (faked on the
    CPU) runs inside torch.cuda.device(that index), and gives the call's result."""

    L, CF, F, E, NL = 1, 4, 1, 3, 2
    m0, m1, row = (L + 1) * CF, 2 * L * CF, (3 * L + 1) * CF
    g = torch.Generator().manual_seed(0)
    args = [torch.randn(F, E, row, generator=g), torch.rand(E, F, generator=g) + 0.2,
            torch.randn(NL, F, m0, m0, generator=g) / m0 ** 0.5, torch.randn(NL, F, m1, m1, generator=g) / m1 ** 0.5,
            torch.randn(NL - 1, F, CF, L * CF, generator=g) / CF ** 0.5]
    want = torch.ops.tilefuse.so2_stack_fwd(*args, L, CF, True)
    entered = device_guard()
    monkeypatch.setattr(tf_device, "other_cuda_device", lambda x: 1)
    got = torch.ops.tilefuse.so2_stack_fwd(*args, L, CF, True)
    assert entered == [1]
    for a, b in zip(got, want):
        assert torch.equal(a, b)


def test_on_tensor_device_passes_calls_through(monkeypatch, device_guard):
    """A call on a tensor of the current device (or off CUDA) runs as it is, with its
    arguments and result; one on another CUDA device runs inside torch.cuda.device(index)."""

    @tf_device.on_tensor_device
    def f(x, y, *, z=0):
        return x, y, z

    entered = device_guard()
    t = torch.ones(1)
    assert f(t, 2, z=3) == (t, 2, 3) and entered == []
    monkeypatch.setattr(tf_device, "other_cuda_device", lambda x: 1)
    assert f(t, 2, z=3) == (t, 2, 3) and entered == [1]


@pytest.mark.gpu
@pytest.mark.skipif(not TWO_GPUS, reason="needs two CUDA GPUs")
def test_each_op_on_the_other_gpu_matches_the_call_made_there():
    """cuda:0 current, tensors on cuda:1: each op's output (and dyt's / grouped's gradients)
    equal bitwise those of the same call with cuda:1 current, and cuda:0 stays current."""
    from tilefuse.ops.grouped_glu_mlp.reference import random_inputs
    torch.cuda.set_device(0)
    dev = torch.device("cuda", 1)
    g = torch.Generator().manual_seed(0)

    def both(call):
        with torch.cuda.device(1):
            want = call()
        got = call()
        torch.cuda.synchronize(dev)
        assert torch.cuda.current_device() == 0
        return got, want

    x = torch.randn(64, 256, generator=g).to(dev).requires_grad_(True)
    a, w, b = (torch.full((1,), 0.5, device=dev), torch.randn(256, generator=g).to(dev),
               torch.randn(256, generator=g).to(dev))

    def dyt_call():
        x.grad = None
        y = tilefuse.dyt(x, a, w, b)
        y.square().sum().backward()
        return y.detach(), x.grad.clone()

    for got, want in zip(*both(dyt_call)):
        assert got.device == dev and torch.equal(got, want)

    def dyt_custom_ops():   # what a compiled graph runs, called eagerly
        y = torch.ops.tilefuse.dyt(x.detach(), a, w, b, True)
        return (y, *torch.ops.tilefuse.dyt_backward(torch.ones_like(y), x.detach(), a, w, b, True))

    for got, want in zip(*both(dyt_custom_ops)):
        assert got.device == dev and torch.equal(got, want)

    q = torch.randn(256, 512, generator=g).to(dev, torch.bfloat16)
    for fn in (tilefuse.quant.quantize_fp8_block, tilefuse.quant.quantize_mxfp8):
        got, want = both(lambda: fn(q))
        assert torch.equal(got.data.view(torch.uint8), want.data.view(torch.uint8))
        assert torch.equal(got.scales.view(torch.uint8), want.scales.view(torch.uint8))

    i = random_inputs([40, 0, 24], 256, 128, torch.bfloat16, bias=False, device=dev,
                      generator=torch.Generator().manual_seed(1))

    def grouped_call():
        x_ = i["x"].detach().requires_grad_(True)
        y = tilefuse.grouped_glu_mlp(x_, i["counts"], i["probs"], i["w1"], i["w2"], glu_interleave=32)
        y.backward(i["dy"])
        return y.detach(), x_.grad

    for got, want in zip(*both(grouped_call)):
        assert got.device == dev and torch.equal(got, want)

    L, CF, F, E, NL = 1, 16, 2, 50, 3
    m0, m1, row = (L + 1) * CF, 2 * L * CF, (3 * L + 1) * CF
    args = [torch.randn(F, E, row, generator=g).to(dev), (torch.rand(E, F, generator=g) + 0.2).to(dev),
            (torch.randn(NL, F, m0, m0, generator=g) / m0 ** 0.5).to(dev),
            (torch.randn(NL, F, m1, m1, generator=g) / m1 ** 0.5).to(dev),
            (torch.randn(NL - 1, F, CF, L * CF, generator=g) / CF ** 0.5).to(dev)]
    got, want = both(lambda: tilefuse.so2_mixing_stack(*args, lmax=L, focus_dim=CF))
    assert got.device == dev and torch.equal(got, want)

    def so2_custom_ops():   # what a compiled graph runs, called eagerly
        x_local, z_all, u_final = torch.ops.tilefuse.so2_stack_fwd(*args, L, CF, True)
        return (x_local, *torch.ops.tilefuse.so2_stack_bwd(torch.ones_like(x_local), x_local, z_all, u_final,
                                                           *args[1:], L, CF, True, True))

    for got, want in zip(*both(so2_custom_ops)):
        assert got.device == dev and torch.equal(got, want)
