"""Public quantizers (tilefuse.quant): argument checks naming the argument, empty inputs, the
kernel path and the level-0 reference path giving the same bits, swizzle=True equal to
swizzle_scales of the compact scales, dequantize() through the public objects, host reads.
"""

import pytest
import torch

import tilefuse
from tilefuse import launches
from tilefuse.quant import (quantize_fp8_block, quantize_mxfp8, quantize_nvfp4, reference,
                            swizzle_scales)

from quant_helpers import mixed, same_bits


def _dev():
    return "cuda" if torch.cuda.is_available() else "cpu"


def _fields(q):
    out = [q.data, q.scales]
    return out + [q.amax] if hasattr(q, "amax") else out


CALLS = {
    "fp8_1x128": lambda x: quantize_fp8_block(x),
    "fp8_128x128_pow2": lambda x: quantize_fp8_block(x, block=(128, 128), pow2_scales=True),
    "mxfp8_swz": lambda x: quantize_mxfp8(x, swizzle=True),
    "nvfp4_2d_swz": lambda x: quantize_nvfp4(x, block_2d=True, swizzle=True),
    "nvfp4_rht": lambda x: quantize_nvfp4(x, rht=True),
}


@pytest.mark.parametrize("name", list(CALLS))
def test_kernel_path_equals_level0_reference(name):
    x = mixed(131, 256, 128, seed=2, log2_range=10).to(_dev())
    with launches.counting() as n:
        q = CALLS[name](x)
    assert sum(n.values()) >= 1                     # the kernels ran (interpreter or GPU)
    with tilefuse.level(0), launches.counting() as n0:
        r = CALLS[name](x)
    assert not n0
    assert all(same_bits(a, b) for a, b in zip(_fields(q), _fields(r)))
    assert torch.equal(torch.isnan(q.dequantize()), torch.isnan(r.dequantize()))


def test_swizzle_flag_matches_swizzle_scales():
    x = mixed(70, 96, 32, seed=4).to(_dev())
    assert same_bits(quantize_mxfp8(x, swizzle=True).scales, swizzle_scales(quantize_mxfp8(x).scales))
    x = mixed(70, 96, 16, seed=5, log2_range=5).to(_dev())
    for block_2d in (False, True):
        q = quantize_nvfp4(x, block_2d=block_2d, swizzle=True)
        c = quantize_nvfp4(x, block_2d=block_2d)
        assert same_bits(q.scales_2d(), c.scales)
        assert same_bits(q.dequantize(), c.dequantize())


def test_shapes_and_dtypes():
    x = torch.randn(37, 256, device=_dev())
    q = quantize_fp8_block(x, block=(128, 128))
    assert q.data.dtype == torch.float8_e4m3fn and q.data.shape == (37, 256)
    assert q.scales.dtype == torch.float32 and q.scales.shape == (1, 2)
    q = quantize_mxfp8(x)
    assert q.scales.dtype == torch.uint8 and q.scales.shape == (37, 8)
    assert quantize_mxfp8(x, swizzle=True).scales.shape == (128 * 8,)
    q = quantize_nvfp4(x)
    assert q.data.dtype == torch.uint8 and q.data.shape == (37, 128)
    assert q.scales.dtype == torch.float8_e4m3fn and q.scales.shape == (37, 16)
    assert q.amax.dtype == torch.float32 and q.amax.shape == ()
    assert quantize_nvfp4(x, block_2d=True).scales.shape == (3, 16)
    assert quantize_nvfp4(x, block_2d=True, swizzle=True).scales.shape == (128 * 16,)


@pytest.mark.parametrize("shape", [(0, 128), (4, 0)])
def test_empty_inputs(shape):
    x = torch.empty(shape, device=_dev())
    q = quantize_fp8_block(x)
    assert q.data.shape == shape and q.dequantize().shape == shape
    q = quantize_mxfp8(x, swizzle=True)
    assert q.scales.numel() == 0 and q.dequantize().shape == shape
    q = quantize_nvfp4(x)
    assert q.data.shape == (shape[0], shape[1] // 2) and q.amax.item() == 0
    assert q.dequantize().shape == shape


def test_dequantize_dtype_and_undo_rht():
    x = mixed(16, 64, 16, seed=6, log2_range=3).to(_dev())
    q = quantize_nvfp4(x, rht=True)
    assert q.dequantize(torch.bfloat16).dtype == torch.bfloat16
    y = reference.hadamard16(x.cpu())
    err_t = (q.dequantize(undo_rht=False).cpu() - y).norm() / y.norm()
    err = (q.dequantize().cpu() - x.cpu()).norm() / x.cpu().norm()
    assert err_t < 0.2 and err < 0.2 and abs(float(err - err_t)) < 1e-5


def test_documented_range_edges():
    """What the docstrings state at the formats' range edges: mxfp8 dequantizes a float16 63488
    to 65536 in float32 and to inf in float16; nvfp4 under a per-tensor amax below 2688 /
    float32's largest keeps finite scales (S_enc capped) and loses its accuracy there."""
    q = quantize_mxfp8(torch.full((1, 32), 63488.0, dtype=torch.float16, device=_dev()))
    assert q.dequantize()[0, 0].item() == 65536.0
    assert torch.isinf(q.dequantize(torch.float16)).all()
    x = torch.tensor([[1e-38, 5e-39, 3.3e-39, -2e-39] + [0.0] * 12], device=_dev())
    q = quantize_nvfp4(x)
    assert torch.isfinite(q.scales.float()).all()
    err = ((q.dequantize() - x).abs() / x.abs().clamp_min(1e-45))[0, :4]
    assert (err > 0.2).any()


def test_amax_argument_is_used_as_given():
    x = torch.randn(8, 32, device=_dev())
    amax = torch.tensor([2.0], dtype=torch.float64, device=_dev())
    q = quantize_nvfp4(x, amax=amax)
    assert q.amax.dtype == torch.float32 and q.amax.item() == 2.0
    # a negative amax is taken by its magnitude: the same codes and (unsigned) block scales
    negative = -amax
    n = quantize_nvfp4(x, amax=negative)
    assert n.amax.item() == 2.0 and negative.item() == -2.0     # the caller's tensor untouched
    assert torch.equal(n.data, q.data) and torch.equal(n.scales.view(torch.uint8), q.scales.view(torch.uint8))
    assert not (n.scales.view(torch.uint8) & 0x80).any()


def test_no_host_read_under_fake_tensors():
    from torch._subclasses.fake_tensor import FakeTensorMode
    with tilefuse.level(0), FakeTensorMode():
        x = torch.randn(32, 128)
        quantize_fp8_block(x)
        quantize_mxfp8(x, swizzle=True)
        quantize_nvfp4(x, block_2d=True, rht=True, swizzle=True)


@pytest.mark.parametrize("name", list(CALLS))
def test_fake_tensors_take_the_reference_without_launching(name, monkeypatch):
    """Where the kernels run for real tensors, fake tensors (FakeTensorMode, as memory
    estimators use it) take the reference: fake outputs with the real call's shapes and
    dtypes, and no launch (the launchers raise)."""
    from torch._subclasses.fake_tensor import FakeTensorMode, is_fake
    from tilefuse.quant import launch
    x = mixed(131, 256, 128, seed=2, log2_range=10).to(_dev())
    with launches.counting() as n:
        want = _fields(CALLS[name](x))
    assert sum(n.values()) >= 1

    def no_launch(*args, **kwargs):
        raise AssertionError("a kernel launch on a fake tensor")
    for launcher in ("fp8_block", "mxfp8", "nvfp4"):
        monkeypatch.setattr(launch, launcher, no_launch)
    mode = FakeTensorMode()
    fake = mode.from_tensor(x)
    with mode:
        got = _fields(CALLS[name](fake))
    for g, w in zip(got, want, strict=True):
        assert is_fake(g) and (g.shape, g.dtype, g.device) == (w.shape, w.dtype, w.device)


BAD = [
    (lambda: quantize_fp8_block([[1.0]]), TypeError, "x must be a torch.Tensor"),
    (lambda: quantize_fp8_block(torch.zeros(4, 128, dtype=torch.float64)), TypeError, "x must be float32"),
    (lambda: quantize_fp8_block(torch.zeros(128)), ValueError, "x must be 2-D"),
    (lambda: quantize_fp8_block(torch.zeros(4, 64)), ValueError, "multiple of 128"),
    (lambda: quantize_fp8_block(torch.zeros(4, 128), block=(1, 64)), ValueError, "block must be"),
    (lambda: quantize_fp8_block(torch.zeros(4, 128), pow2_scales=1), TypeError, "pow2_scales"),
    (lambda: quantize_mxfp8(torch.zeros(4, 48)), ValueError, "multiple of 32"),
    (lambda: quantize_mxfp8(torch.zeros(4, 32), swizzle="yes"), TypeError, "swizzle"),
    (lambda: quantize_nvfp4(torch.zeros(4, 24)), ValueError, "multiple of 16"),
    (lambda: quantize_nvfp4(torch.zeros(4, 16), block_2d=None), TypeError, "block_2d"),
    (lambda: quantize_nvfp4(torch.zeros(4, 16), rht=0), TypeError, "rht"),
    (lambda: quantize_nvfp4(torch.zeros(4, 16), amax=1.0), TypeError, "amax"),
    (lambda: quantize_nvfp4(torch.zeros(4, 16), amax=torch.tensor(1)), TypeError, "amax"),
    (lambda: quantize_nvfp4(torch.zeros(4, 16), amax=torch.ones(2)), ValueError, "amax"),
    (lambda: quantize_nvfp4(torch.zeros(4, 16), amax=torch.ones(1, device="meta")), ValueError, "amax"),
    (lambda: quantize_nvfp4(torch.zeros(4, 16), stochastic_bits=torch.zeros(4, 16)), TypeError,
     "stochastic_bits"),
    (lambda: quantize_nvfp4(torch.zeros(4, 16), stochastic_bits=torch.zeros(4, 32, dtype=torch.int32)),
     ValueError, "stochastic_bits"),
    # 2**31 rows (an expanded view: no memory): the kernels' 32-bit tile indices would wrap
    (lambda: quantize_mxfp8(torch.zeros(1, 32).expand(2 ** 31, 32)), ValueError, "below 2\\*\\*31 - 2\\*\\*24"),
    (lambda: quantize_nvfp4(torch.zeros(1, 16).expand(2 ** 31, 16)), ValueError, "below 2\\*\\*31 - 2\\*\\*24"),
    (lambda: quantize_fp8_block(torch.zeros(1, 128).expand(2 ** 31, 128)), ValueError, "below 2\\*\\*31 - 2\\*\\*24"),
    # just below 2**31: the grid's padding programs past a K of 2**31 - 32 read and wrote at
    # negative columns, and 2**31 - 15 rows left every nvfp4 2-D scale unwritten
    (lambda: quantize_mxfp8(torch.zeros(1, 1).expand(1, 2 ** 31 - 32)), ValueError, "below 2\\*\\*31 - 2\\*\\*24"),
    (lambda: quantize_nvfp4(torch.zeros(1, 16).expand(2 ** 31 - 15, 16), block_2d=True), ValueError,
     "below 2\\*\\*31 - 2\\*\\*24"),
]


@pytest.mark.parametrize("call,exc,match", BAD, ids=[f"{i}-{b[2][:20]}" for i, b in enumerate(BAD)])
def test_bad_arguments(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_results_hold_together():
    """A result's data and scales belong together: a field replaced by another shape or dtype (a
    slice of the data, another block's scales) raises, naming the class and field, where it
    dequantized to wrong values without a word; == is identity (the generated __eq__ compared
    the tensors and raised)."""
    import dataclasses
    x = torch.randn(40, 128)
    results = [quantize_fp8_block(x), quantize_fp8_block(x, block=(128, 128)), quantize_mxfp8(x),
               quantize_mxfp8(x, swizzle=True), quantize_nvfp4(x), quantize_nvfp4(x, block_2d=True),
               quantize_nvfp4(x, swizzle=True), quantize_nvfp4(x, block_2d=True, swizzle=True)]
    for q in results:
        name = type(q).__name__
        assert q == q and q != dataclasses.replace(q)       # identity, and a copy is another result
        assert dataclasses.replace(q).dequantize().shape == (40, 128)
        taller = q.data.view(torch.uint8).repeat(5, 1).view(q.data.dtype)   # 200 rows: more scale rows
        with pytest.raises(ValueError, match=f"{name}: scales must have shape"):           # in every layout
            dataclasses.replace(q, data=taller)
        with pytest.raises(ValueError, match=f"{name}: scales must have shape"):
            dataclasses.replace(q, scales=q.scales.flatten()[:1])
        with pytest.raises(TypeError, match=f"{name}: scales must be a"):
            dataclasses.replace(q, scales=q.scales.to(torch.float64))
        with pytest.raises(TypeError, match=f"{name}: data must be a 2-D"):
            dataclasses.replace(q, data=q.data[None])
    with pytest.raises(ValueError, match="FP8BlockQuantized: block must be one of"):
        dataclasses.replace(results[0], block=(1, 64))
    with pytest.raises(TypeError, match="NVFP4Quantized: amax must be a torch.float32"):
        dataclasses.replace(results[4], amax=results[4].amax.double())
    with pytest.raises(ValueError, match="NVFP4Quantized: amax must have shape"):
        dataclasses.replace(results[4], amax=torch.ones(2))


def test_results_refuse_flags_and_blocks_of_other_types_and_devices():
    """A result's flags are bools and its block two ints, and its scales (and nvfp4's amax) sit
    on its data's device: before, ``rht="no"`` (any truthy object) was taken as True, so
    dequantize() undid a transform the data never had (a wrong result without a word), a block
    of (True, 128) or (1.0, 128.0) passed the membership test (True == 1) and failed inside
    torch, and scales on another device failed inside torch. A list block is kept as a tuple."""
    import dataclasses

    import numpy as np
    x = torch.randn(40, 128)
    fp8, mx, nv = quantize_fp8_block(x), quantize_mxfp8(x), quantize_nvfp4(x)
    for q, flag in ((fp8, "pow2_scales"), (mx, "swizzled"), (nv, "block_2d"), (nv, "rht"), (nv, "swizzled")):
        for bad in ("no", 1, np.False_):
            with pytest.raises(TypeError, match=f"{type(q).__name__}: {flag} must be a bool"):
                dataclasses.replace(q, **{flag: bad})
    with pytest.raises(TypeError, match="must be a bool, got numpy.bool"):   # not "got bool"
        dataclasses.replace(nv, rht=np.False_)
    for bad in ((True, 128), (1.0, 128.0)):
        with pytest.raises(TypeError, match="FP8BlockQuantized: block must be a tuple of two ints"):
            dataclasses.replace(fp8, block=bad)
    listed = dataclasses.replace(fp8, block=[1, 128])
    assert listed.block == (1, 128) and torch.equal(listed.dequantize(), fp8.dequantize())
    for q in (fp8, mx, nv):
        with pytest.raises(ValueError, match=f"{type(q).__name__}: scales must be on the data's device"):
            dataclasses.replace(q, scales=q.scales.to("meta"))
    with pytest.raises(ValueError, match="NVFP4Quantized: amax must be on the data's device"):
        dataclasses.replace(nv, amax=nv.amax.to("meta"))


def test_reference_dequantizers_refuse_scales_of_another_shape():
    """tilefuse.quant.reference's dequantizers (exported; the kernels' bit-exact oracle) check
    the scales' shape against the data's: before, one scale row was broadcast over every row
    block (or extra ones dropped) and the result was wrong without a word."""
    from tilefuse.quant import reference as qref
    x = torch.randn(4, 128) * torch.tensor([1.0, 10.0, 100.0, 1000.0])[:, None]
    q = quantize_fp8_block(x)
    assert torch.equal(qref.dequantize_fp8_block(q.data, q.scales, (1, 128)), q.dequantize())
    with pytest.raises(ValueError, match=r"dequantize_fp8_block: scales must have shape \(4, 1\)"):
        qref.dequantize_fp8_block(q.data, q.scales[:1], (1, 128))
    with pytest.raises(ValueError, match=r"dequantize_fp8_block: scales must have shape \(1, 1\)"):
        qref.dequantize_fp8_block(q.data, q.scales, (128, 128))
    m = quantize_mxfp8(x)
    with pytest.raises(ValueError, match="dequantize_mxfp8: scales must have shape"):
        qref.dequantize_mxfp8(m.data, m.scales[:1])
    n = quantize_nvfp4(x)
    with pytest.raises(ValueError, match="dequantize_nvfp4: scales must have shape"):
        qref.dequantize_nvfp4(n.data, n.scales[:1], n.amax, False, False)
    with pytest.raises(ValueError, match="dequantize_nvfp4: scales must have shape"):
        qref.dequantize_nvfp4(n.data, n.scales, n.amax, True, False)   # per-row scales read as 16x16 blocks
