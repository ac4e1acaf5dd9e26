"""triton_common.SpecializingLauncher: a kernel whose arguments change per call, launched
through the JIT once per argument specialization and then through the compiled kernel's
launcher (the Gluon GEMMs' host route). Route choices with a fake JIT and compiled kernel (any
machine); the real kernels' direct launches against the JIT's: tests/test_grouped_ws_rows.py
and tests/test_grouped_ws_wgrad.py (Hopper). At the end, CompiledLauncher's compiled kernels
shared between launchers of one kernel (its other route choices: tests/test_dyt_lean.py)."""

import dataclasses

import pytest
import torch
from launcher_fakes import FakeCompiled

from tilefuse.ops import triton_common
from tilefuse.ops.triton_common import CompiledLauncher, SpecializingLauncher, specialization


class _FakeJIT:
    """A JITFunction stand-in: (desc, x_ptr, n, BLOCK constexpr, MODE constexpr)."""

    arg_names = ["desc", "x_ptr", "n", "BLOCK", "MODE"]
    constexprs = [3, 4]
    __name__ = "fake_kernel"

    def __init__(self):
        self.log = []
        self.compiled = FakeCompiled(self.log)

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            self.log.append(("jit", grid, args, kwargs))
            return self.compiled
        return launch


@dataclasses.dataclass
class _Desc:
    """The fields of a (Gluon) TensorDescriptor that the launcher keys on."""
    base: torch.Tensor
    shape: list
    strides: list
    block_shape: list
    layout: str = "nvmma"
    padding: str = "zero"


@pytest.fixture
def fake(monkeypatch):
    monkeypatch.setattr(triton_common, "current_cuda_device", lambda: 0)
    monkeypatch.setattr(triton_common, "current_cuda_stream", lambda device: 1234)
    fn = _FakeJIT()
    launcher = SpecializingLauncher(fn, num_warps=4)
    launcher.direct = True        # as on a GPU (the interpreter always takes the JIT)
    return fn, launcher


def _desc(t, block=(16, 16)):
    return _Desc(t, list(t.shape), list(t.stride()), list(block))


def test_goes_direct_after_the_first_launch_of_a_key(fake):
    fn, launch = fake
    x = torch.zeros(64, 32)
    d = _desc(x)
    launch((5,), (d, x, 48), (64, "a"))
    launch((7, 2), (d, x, 48), (64, "a"))
    (jit, direct) = fn.log
    assert jit == ("jit", (5,), (d, x, 48), {"BLOCK": 64, "MODE": "a", "num_warps": 4})
    # the JIT's launch call: the grid, descriptors as they are, pointers as ints, constexprs
    assert direct == ("direct", (7, 2, 1, 1234, fn.compiled.function, ("packed",), None, None, None,
                                 d, x.data_ptr(), 48, 64, "a"))


@pytest.mark.parametrize("change", ["int==1", "int%16", "int width", "alignment", "dtype", "block", "layout",
                                    "desc stride", "constexpr", "constexpr class", "constexpr -0.0", "device"])
def test_a_new_specialization_goes_through_the_jit(fake, monkeypatch, change):
    fn, launch = fake
    buf = torch.zeros(4096)
    x = buf[:2048].view(64, 32)
    args, consts = [_desc(x), x, 48], (64, "a")
    if change == "constexpr -0.0":
        consts = (0.0, "a")
    launch((1,), tuple(args), consts)
    launch((1,), tuple(args), consts)
    if change == "int==1":
        args[2] = 1
    elif change == "int%16":
        args[2] = 40
    elif change == "int width":
        args[2] = 48 << 32
    elif change == "alignment":
        args[1] = buf[1:2049].view(64, 32)        # 4 bytes off a 16-byte boundary
    elif change == "dtype":
        args[1] = x.double()
    elif change == "block":
        args[0] = _desc(x, (32, 16))
    elif change == "layout":
        args[0] = dataclasses.replace(_desc(x), layout="other")
    elif change == "desc stride":
        args[0] = _desc(buf[:2040].view(60, 34))   # 34: not a multiple of 16
    elif change == "constexpr":
        consts = (128, "a")
    elif change == "constexpr class":            # equal to 64, another constexpr to Triton (its text)
        consts = (64.0, "a")
    elif change == "constexpr -0.0":
        consts = (-0.0, "a")
    elif change == "device":
        monkeypatch.setattr(triton_common, "current_cuda_device", lambda: 1)
    launch((1,), tuple(args), consts)
    launch((1,), tuple(args), consts)
    assert [e[0] for e in fn.log] == ["jit", "direct", "jit", "direct"], change


def test_the_specialization_of_each_argument_kind():
    assert specialization(1) != specialization(17) != specialization(16) != specialization(32 << 32)
    assert specialization(16) == specialization(48) and specialization(3) == specialization(5)
    x = torch.zeros(64)
    assert specialization(x) == (torch.float32, True, -1) and specialization(x[1:]) == (torch.float32, False, -1)
    assert specialization(torch.nn.Parameter(x)) == specialization(x)
    assert specialization(None) != specialization(False) != specialization(True)
    with pytest.raises(TypeError, match="no rule"):
        specialization("text")


def test_a_tensor_of_another_device_goes_through_the_jit(fake, monkeypatch):
    """A tensor's device is part of its specialization: the direct route hands the compiled
    kernel an address without asking whether the GPU can read it (the JIT asks, and raises for
    a CPU tensor), so a tensor on another device than the held kernel's arguments must take
    the JIT. (On the H200, a CPU tensor of a held key's dtype and alignment reached a compiled
    kernel: an illegal memory access, benchmarks/results/2026-12-04-h200-aj run 8.)"""
    fn, launch = fake
    x = torch.zeros(64, 32)
    args, consts = (_desc(x), x, 48), (64, "a")
    launch((1,), args, consts)
    launch((1,), args, consts)
    real = torch.Tensor.get_device
    monkeypatch.setattr(torch.Tensor, "get_device", lambda t: 0 if t is x else real(t))   # x "on cuda:0"
    launch((1,), args, consts)
    assert [e[0] for e in fn.log] == ["jit", "direct", "jit"]


def test_an_argument_without_a_rule_goes_through_the_jit(fake):
    fn, launch = fake
    x = torch.zeros(16)
    for _ in range(2):
        launch((1,), ([1, 2], x, 16), (64, "a"))
    assert [e[0] for e in fn.log] == ["jit", "jit"]


def test_passes_the_arguments_and_metadata_to_launch_hooks(fake):
    fn, launch = fake
    x = torch.zeros(16)
    d = _desc(x.view(4, 4))
    launch((1,), (d, x, 16), (64, "a"))
    hook = triton_common._triton_knobs.runtime.launch_enter_hook
    seen = []
    hook.add(seen.append)
    try:
        launch((1,), (d, x, 16), (64, "a"))
    finally:
        hook.remove(seen.append)
    args = fn.log[-1][1]
    assert args[6] == {"grid": (1,), "args": (d, x, 16, 64, "a")} and args[7] is hook
    assert args[9] is d and args[10] is x                # as the JIT passes them


def test_falls_back_to_the_jit_when_a_direct_launch_fails(fake):
    fn, launch = fake
    x = torch.zeros(16)
    launch((1,), (None, x, 16), (64, "a"))
    fn.compiled.fail = True
    with pytest.warns(RuntimeWarning, match="through Triton's JIT"):
        launch((1,), (None, x, 16), (64, "a"))
    launch((1,), (None, x, 16), (64, "a"))
    assert [e[0] for e in fn.log] == ["jit", "jit", "jit"] and not launch.direct


def test_jit_launches_context_sends_every_launch_through_the_jit(fake):
    fn, launch = fake
    x = torch.zeros(16)
    launch((1,), (None, x, 16), (64, "a"))
    before = triton_common.jit_launch_count()
    with triton_common.jit_launches():
        launch((1,), (None, x, 16), (64, "a"))
    assert triton_common.jit_launch_count() == before + 1 and [e[0] for e in fn.log] == ["jit", "jit"]


def test_overlapping_jit_launches_blocks_in_two_threads_restore_direct_launches():
    """Thread A enters, thread B enters, A leaves, B leaves: direct launches are back on (with
    save-and-restore each block put back what the other had set: A restored True while B's
    block was open, then B restored A's False for good)."""
    from overlap import overlapping
    assert overlapping(triton_common.jit_launches, lambda: triton_common.DIRECT_LAUNCH) is False
    assert triton_common.DIRECT_LAUNCH is True


def test_constexprs_must_match_the_kernels_trailing_ones(fake):
    fn, launch = fake
    with pytest.raises(TypeError, match="1 constexprs given, the kernel has 2"):
        launch((1,), (None, torch.zeros(4), 4), (64,))


def test_constexprs_not_trailing_launch_through_the_jit_only():
    class Mixed(_FakeJIT):
        arg_names = ["BLOCK", "x_ptr", "n", "MODE", "desc"]
        constexprs = [0, 3]
    assert not SpecializingLauncher(Mixed()).direct


def test_launch_held_launches_only_a_kernel_launch_keyed_compiled(fake):
    """launch_held: False (nothing launched) until launch_keyed's JIT launch of that key has
    compiled the kernel, then the direct launch (True); another key is not held; under
    jit_launches nothing is held."""
    fn, launch = fake
    x = torch.zeros(16)
    assert not launch.launch_held("k", (1,), (None, x, 16), (64, "a")) and fn.log == []
    launch.launch_keyed("k", (1,), (None, x, 16), (64, "a"))
    assert launch.launch_held("k", (2,), (None, x, 16), (64, "a"))
    assert not launch.launch_held("other", (2,), (None, x, 16), (64, "a"))
    with triton_common.jit_launches():
        assert not launch.launch_held("k", (2,), (None, x, 16), (64, "a"))
    assert [e[0] for e in fn.log] == ["jit", "direct"] and fn.log[1][1][:3] == (2, 1, 1)


def test_launch_held_reports_a_failed_direct_launch(fake):
    fn, launch = fake
    x = torch.zeros(16)
    launch.launch_keyed("k", (1,), (None, x, 16), (64, "a"))
    fn.compiled.fail = True
    with pytest.warns(RuntimeWarning, match="through Triton's JIT"):
        assert not launch.launch_held("k", (1,), (None, x, 16), (64, "a"))
    assert not launch.direct and not launch.launch_held("k", (1,), (None, x, 16), (64, "a"))


# --- CompiledLauncher: compiled kernels shared between launchers -------------------------------

class _FakeEltJIT(_FakeJIT):
    """(x_ptr, y_ptr, n, BLOCK constexpr), for CompiledLauncher."""

    arg_names = ["x_ptr", "y_ptr", "n", "BLOCK"]
    constexprs = [3]


@pytest.fixture
def shared(monkeypatch):
    """A fake kernel and a factory of direct CompiledLaunchers of it, with an empty shared cache."""
    monkeypatch.setattr(triton_common, "current_cuda_device", lambda: 0)
    monkeypatch.setattr(triton_common, "current_cuda_stream", lambda device: 1234)
    monkeypatch.setattr(triton_common, "_shared_entries", {})
    fn = _FakeEltJIT()

    def make(scalars=(5,), constexprs=None, grid=(7,), kernel=None, **options):
        launcher = CompiledLauncher(kernel or fn, grid, scalars, constexprs or {"BLOCK": 64},
                                    **(options or {"num_warps": 4}))
        launcher.direct = True        # as on a GPU (the interpreter always takes the JIT)
        return launcher
    return fn, make


def test_a_new_compiled_launcher_launches_a_kernel_another_one_holds_directly(shared):
    """grouped_glu_mlp's call plans build launchers per token count T (a scalar and the grid):
    the launcher of a new T launches the kernel the last T's compiled, without a JIT launch."""
    fn, make = shared
    x, y = torch.zeros(8), torch.zeros(8)
    make((48,))(x, y)
    x2, y2 = torch.zeros(16), torch.zeros(16)            # other addresses, the same alignment
    before = triton_common.jit_launch_count()
    make((96,), grid=(9, 2))(x2, y2)
    assert triton_common.jit_launch_count() == before
    (jit, direct) = fn.log
    assert jit == ("jit", (7,), (x, y, 48), {"BLOCK": 64, "num_warps": 4})
    assert direct == ("direct", (9, 2, 1, 1234, fn.compiled.function, ("packed",), None, None, None,
                                 x2.data_ptr(), y2.data_ptr(), 96, 64))


@pytest.mark.parametrize("a, b", [(5, 37), (16, 48), (0, 32), (1, 1), (-3, 2**31 - 1), (1 << 32, 3 << 32),
                                  (2**31 + 1, 2**63 - 1), (2**63 + 3, 2**64 - 1), (2.5, -0.0), (True, True),
                                  (None, None)])
def test_scalars_of_one_specialization_class_share(shared, a, b):
    fn, make = shared
    x = torch.zeros(8)
    make((a,))(x, x)
    make((b,))(x, x)
    assert [e[0] for e in fn.log] == ["jit", "direct"] and fn.log[1][1][-2] == b


@pytest.mark.parametrize("change", ["int==1", "int%16", "int width", "u64", "bool", "none", "constexpr",
                                    "constexpr class", "constexpr -0.0", "option", "new option", "dtype",
                                    "alignment", "device", "tensor device", "kernel"])
def test_what_selects_another_compiled_kernel_is_not_shared(shared, monkeypatch, change):
    fn, make = shared
    buf = torch.zeros(64)
    x = buf[:8]
    first, second = dict(scalars=(2,)), dict(scalars=(2,))
    tensors = (x, x)
    if change == "int==1":
        second["scalars"] = (1,)
    elif change == "int%16":
        first["scalars"], second["scalars"] = (16,), (17,)
    elif change == "int width":
        second["scalars"] = (2 + (1 << 32),)
    elif change == "u64":
        first["scalars"], second["scalars"] = ((1 << 62) + 2,), ((1 << 63) + 2,)
    elif change == "bool":
        first["scalars"], second["scalars"] = (False,), (0,)
    elif change == "none":
        first["scalars"], second["scalars"] = (None,), (0,)
    elif change == "constexpr":
        second["constexprs"] = {"BLOCK": 128}
    elif change == "constexpr class":
        first["constexprs"], second["constexprs"] = {"BLOCK": 1}, {"BLOCK": True}
    elif change == "constexpr -0.0":
        first["constexprs"], second["constexprs"] = {"BLOCK": 0.0}, {"BLOCK": -0.0}
    elif change == "option":
        second["num_warps"] = 8
    elif change == "new option":
        second.update(num_warps=4, num_stages=2)
    elif change == "dtype":
        tensors = (x, x.double())
    elif change == "alignment":
        tensors = (x, buf[1:9])                   # 4 bytes off a 16-byte boundary
    elif change == "kernel":
        other = second["kernel"] = _FakeEltJIT()
        other.log, other.compiled = fn.log, FakeCompiled(fn.log)     # one log for both kernels
    make(**first)(x, x)
    if change == "device":
        monkeypatch.setattr(triton_common, "current_cuda_device", lambda: 1)
    elif change == "tensor device":
        real = torch.Tensor.get_device
        monkeypatch.setattr(torch.Tensor, "get_device", lambda t: 0 if t is x else real(t))   # x "on cuda:0"
    launcher = make(**second)
    launcher(*tensors)
    launcher(*tensors)
    assert [e[0] for e in fn.log] == ["jit", "jit", "direct"], change


@pytest.mark.parametrize("case", ["unhashable constexpr", "scalar without a rule", "integer beyond 64 bits"])
def test_launchers_without_a_sharing_rule_share_nothing_and_still_launch(shared, case):
    fn, make = shared
    x = torch.zeros(8)
    kw = {"unhashable constexpr": dict(constexprs={"BLOCK": [64]}), "scalar without a rule": dict(scalars=("n",)),
          "integer beyond 64 bits": dict(scalars=(1 << 64,))}[case]
    for _ in range(2):
        launcher = make(**kw)
        launcher(x, x)
        launcher(x, x)
    assert [e[0] for e in fn.log] == ["jit", "direct"] * 2 and triton_common._shared_entries == {}


def test_a_shared_kernel_is_not_used_where_launches_go_through_the_jit(shared):
    fn, make = shared
    x = torch.zeros(8)
    make()(x, x)
    with triton_common.jit_launches():
        make()(x, x)
    assert [e[0] for e in fn.log] == ["jit", "jit"]


def test_a_failed_direct_launch_of_a_shared_kernel_falls_back_to_the_jit(shared):
    fn, make = shared
    x = torch.zeros(8)
    make()(x, x)
    fn.compiled.fail = True
    launcher = make((37,))
    with pytest.warns(RuntimeWarning, match="through Triton's JIT") as record:
        launcher(x, x)
    launcher(x, x)
    assert [e[0] for e in fn.log] == ["jit", "jit", "jit"] and not launcher.direct
    assert record[0].filename == __file__          # the warning names the launcher's caller


def test_the_shared_cache_stays_within_its_bound(shared, monkeypatch):
    fn, make = shared
    monkeypatch.setattr(triton_common, "_SHARED_LIMIT", 2)
    x = torch.zeros(8)
    for block in (16, 32, 64):
        make(constexprs={"BLOCK": block})(x, x)
        assert len(triton_common._shared_entries) <= 2
    make(constexprs={"BLOCK": 64})(x, x)            # still shared
    make(constexprs={"BLOCK": 16})(x, x)            # cleared: compiled again
    assert [e[0] for e in fn.log] == ["jit", "jit", "jit", "direct", "jit"]


def test_launchers_in_several_threads_launch_only_the_kernel_of_their_key(shared, monkeypatch):
    """Threads building launchers of several specializations while the (small) shared cache
    fills and is cleared: every direct launch runs the kernel the JIT compiled for its
    launcher's specialization."""
    import random
    import threading
    _, make = shared
    monkeypatch.setattr(triton_common, "_SHARED_LIMIT", 3)

    class PerKeyJIT(_FakeEltJIT):
        """One compiled kernel per (n % 16 == 0, BLOCK)."""
        kernels, lock = {}, threading.Lock()

        def __getitem__(self, grid):
            def launch(x, y, n, BLOCK, **options):
                with self.lock:
                    compiled = self.kernels.setdefault((n % 16 == 0, BLOCK), FakeCompiled(self.log))
                self.log.append(("jit", n, BLOCK))
                return compiled
            return launch

    fn, x = PerKeyJIT(), torch.zeros(8)

    def work(seed):
        rng = random.Random(seed)
        for _ in range(150):
            launcher = make((rng.choice((3, 5, 16, 32)),), {"BLOCK": rng.choice((64, 128))}, kernel=fn)
            launcher(x, x)
            launcher(x, x)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    key_of = {c.function: k for k, c in fn.kernels.items()}
    direct = [e[1] for e in fn.log if e[0] == "direct"]
    assert len(fn.log) == 4 * 150 * 2 and len(direct) >= 4 * 150
    assert all(key_of[a[4]] == (a[-2] % 16 == 0, a[-1]) for a in direct)
