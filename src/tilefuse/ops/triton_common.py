"""@triton.jit helpers shared by the op families' kernels.

Under Triton's interpreter (the CPU test path) some conversions differ from the GPU's; the
helpers here give CPU tests the GPU's results. Each difference is a named workaround:
- the interpreter converts float32 -> bfloat16 by truncation where the GPU rounds to nearest
  even, and bfloat16 -> float32 wrongly for subnormals: importing this module under the
  interpreter installs interpreter_dot's exact casts;
- the interpreter computes tl.dot on bfloat16 operands wrongly (it reinterprets their bits),
  so dot_f32acc upcasts them to float32 there (bf16 x bf16 products are exact in float32);
- the interpreter's float tl.dot sums in an order that depends on numpy's BLAS and the CPU, so
  importing this module under the interpreter installs interpreter_dot's fixed-order dot.
Compiled kernels take the plain paths.

Beside the @triton.jit helpers, ``CompiledLauncher`` (host side): the cheap launch route for
kernels launched many times with the same grid and scalars (a compiled kernel's launcher
instead of the JIT's per-call binding and specialization), and ``SpecializingLauncher``, the
same for kernels whose grid and arguments change per call (the Gluon GEMMs).
"""

import contextlib
import functools

import torch
import triton
import triton.language as tl

try:
    from triton import knobs as _triton_knobs
except ImportError:   # a Triton without triton.knobs: CompiledLauncher launches through the JIT
    _triton_knobs = None

from ..device import current_cuda_device, current_cuda_stream
from ..policy import interpreter_enabled
from ..utils import SharedOverride
from . import interpreter_dot

INTERPRETER = tl.constexpr(interpreter_enabled())
if INTERPRETER:
    interpreter_dot.install()


@triton.jit
def sigmoid_f32(x):
    return 1.0 / (1.0 + tl.exp(-x))


@triton.jit
def mul_rn(a, b):
    """a * b rounded to float32 on its own: compiled, the explicit rounding mode keeps the
    compiler from contracting the product into a later add (an FMA would skip this rounding).
    For a product that must equal one a kernel stored before (and read back) bitwise."""
    if INTERPRETER:
        return a * b
    else:
        return tl.inline_asm_elementwise("mul.rn.f32 $0, $1, $2;", "=r,r,r", [a, b], dtype=tl.float32,
                                         is_pure=True, pack=1)


@triton.jit
def to_output(y, ptr):
    """Convert float32 ``y`` to ``ptr``'s element type, rounding to nearest even."""
    return y.to(ptr.dtype.element_ty)


@triton.jit
def dot_f32acc(a, b, acc, IEEE: tl.constexpr):
    """acc + a @ b with float32 accumulation; IEEE: no TF32 for float32 operands."""
    if INTERPRETER:
        a = a.to(tl.float32)
        b = b.to(tl.float32)
    if IEEE:
        return tl.dot(a, b, acc, input_precision="ieee")
    else:
        return tl.dot(a, b, acc)


# --- launching ------------------------------------------------------------------------------

# Tests and benchmarks set this to False to send every CompiledLauncher launch through the JIT
# (the reference the direct route must match bitwise).
DIRECT_LAUNCH = True
_jit_launches = 0


def _jit_apply():
    global DIRECT_LAUNCH
    saved, DIRECT_LAUNCH = DIRECT_LAUNCH, False
    return saved


def _jit_restore(saved):
    global DIRECT_LAUNCH
    DIRECT_LAUNCH = saved


_jit_override = SharedOverride(_jit_apply, _jit_restore)


def jit_launches():
    """Inside the block every CompiledLauncher launch goes through Triton's JIT (``DIRECT_LAUNCH``
    False, process-wide); the setting from before the first open block is restored when the
    last one closes (utils.SharedOverride: overlapping blocks in two threads)."""
    return _jit_override()


def jit_launch_count() -> int:
    """How many CompiledLauncher launches went through Triton's JIT (first launches, the
    interpreter, fallbacks): tests prove the direct route ran by this count not moving."""
    return _jit_launches


# Compiled kernels shared by every CompiledLauncher: CompiledLauncher._shared_key -> (the kernel's
# @triton.jit function, which the key names by id and the value keeps alive so that the id is not
# reused, and _compiled_entry's tuple). Plain dict operations, each atomic under the GIL: a lookup
# takes the value it finds or None, and any value stored under a key is right for that key, so two
# threads storing the same key, or one clearing the dict while another looks up, launch nothing
# wrong (at worst one more JIT launch).
_shared_entries: dict = {}
_SHARED_LIMIT = 4096     # cleared when full: a launcher keeps the kernels it already holds


def _shared_get(key):
    try:
        return _shared_entries.get(key)
    except Exception:   # noqa: BLE001  a value whose comparison raises: nothing shared
        return None


def _share(key, fn, entry):
    if len(_shared_entries) >= _SHARED_LIMIT:
        _shared_entries.clear()
    with contextlib.suppress(Exception):   # as in _shared_get
        _shared_entries[key] = (fn, entry)


def _scalar_class(v):
    """The class of one fixed scalar argument that selects a compiled kernel, or finer: an
    integer on ``== 1`` (a constexpr 1 in Triton), divisibility by 16 and the type Triton passes
    it as (i32 in [-2**31, 2**31), i64 in [-2**63, 2**63), u64 in [2**63, 2**64); triton/runtime/
    jit.py, specialize_impl in 3.6, native_specialize_impl (C++) in 3.8, with BaseBackend.
    get_int_specialization); a float by its type (always fp32, never specialized on its value),
    a bool by its value (u1 in Triton, by type would do), None as itself (a constexpr).
    Parameters marked do_not_specialize get the same classes: finer than Triton's, never coarser.
    TypeError for any other kind (or an integer Triton cannot pass): its launchers share nothing."""
    cls = v.__class__
    if cls is int:
        if -0x80000000 <= v <= 0x7FFFFFFF:
            width = "i32"
        elif -(1 << 63) <= v < 1 << 63:
            width = "i64"
        elif 0 <= v < 1 << 64:
            width = "u64"
        else:
            raise TypeError(f"an integer scalar out of 64 bits: {v}")
        return (int, v == 1, v % 16 == 0, width)
    if cls is float:
        return (float,)
    if cls is bool or v is None:
        return (cls, v)
    raise TypeError(f"no sharing rule for a {cls.__name__} scalar")


def constexpr_key(values: tuple) -> tuple:
    """Launch-key parts for constexpr (or option) ``values``: the values and their classes, and
    where a float is among them their texts. Triton keys a constexpr by its text, so ``True``
    and ``1``, or ``0.0`` and ``-0.0``, which compare equal in a plain tuple, compile apart.
    On the direct-launch path of every SpecializingLauncher call: about half a microsecond."""
    kinds = tuple(map(type, values))
    if float in kinds:
        return values, kinds, tuple([repr(v) for v in values])
    return values, kinds


class CompiledLauncher:
    """One @triton.jit kernel with everything but its tensor arguments fixed: the grid, the
    trailing scalar arguments, the constexprs and the launch options (num_warps, ...).

    ``launcher(*tensors)`` launches ``fn[grid](*tensors, *scalars, **constexprs, **options)``.
    The JIT's per-call path (binding the arguments, computing their specialization and the
    cache key: tens of microseconds a launch on the H200 host) runs only on the first launch
    for each (current device, pointer alignment); it compiles the kernel and returns it, and
    later launches with the same device and alignment hand it to ``_launch_compiled``.

    Launchers share the kernels they hold, so that a new launcher of a kernel another one has
    launched launches directly from its first call: call plans build launchers per shape, with
    the token count among the scalars and the grid (grouped_glu_mlp's plans, one per token
    count, which changes every step under dropless routing), and each would otherwise take the
    JIT's path on its first launch. A launcher without a kernel for a launch's device and
    alignment looks it up in a process-wide cache (``_shared_entries``, cleared at
    ``_SHARED_LIMIT`` keys) by everything the compiled kernel depends on (``_shared_key``):
    the kernel, its constexprs and launch options, each scalar's specialization class (an
    integer's ``== 1``, divisibility by 16 and width: ``_scalar_class``), each tensor's dtype
    and device, the current device and the pointers' alignment; a kernel the JIT compiles is
    stored there too. The grid and the scalars' values are not in it: they are passed at every
    launch, as the JIT passes them. The tensors' devices are, so a tensor on a device no JIT
    launch of that key has accepted still reaches the JIT (which reports it). A launcher with
    a scalar, constexpr or option of a kind without a rule, or an unhashable one, shares
    nothing. Only direct launches use the cache: under ``DIRECT_LAUNCH`` False and after a
    failed direct launch every launch goes through the JIT.

    Triton specializes a kernel on its arguments: pointers on their dtype and on 16-byte
    alignment, integers on ``== 1``, on divisibility by 16 and on their width (triton/runtime/
    jit.py, create_function_from_signature; backends/compiler.py, BaseBackend.
    get_int_specialization / get_tensor_specialization). The scalars are fixed here, and each
    launch's pointer alignment is part of the key the compiled kernel is looked up by, so a
    kernel compiled for aligned pointers never runs on an unaligned one. The caller keeps the
    tensors' dtypes the same on every call (it builds one launcher per dtype combination), and
    passes tensors on the current CUDA device (the direct route hands the launcher their
    addresses; the JIT's first launch is where a wrong device is reported).

    The JIT runs every launch under Triton's interpreter, with ``DIRECT_LAUNCH`` False, when
    the kernel's parameters are not (tensors, scalars, constexprs) in that order, and from the
    first direct launch that raises on (with a warning). The direct route skips what the JIT
    checks on every launch but a compiled kernel does not need: its pre-run hooks (none on
    tilefuse's kernels) and whether globals the kernel read have changed since it compiled.
    Compilation settings read at compile time (TRITON_DEBUG, Triton's instrumentation mode)
    apply to kernels compiled after they are set, and launchers share kernels: set them
    before the first launch of any launcher.
    """

    __slots__ = ("fn", "grid", "grid3", "scalars", "kwargs", "tail", "direct", "_entries")

    def __init__(self, fn, grid, scalars=(), constexprs=None, **options):
        constexprs = dict(constexprs or {})
        self.fn = fn
        self.grid = tuple(grid)
        self.grid3 = self.grid + (1,) * (3 - len(self.grid))
        self.scalars = tuple(scalars)
        self.kwargs = {**constexprs, **options}
        self._entries: dict = {}
        names = _trailing_constexpr_names(fn, len(self.scalars), constexprs)
        self.direct = names is not None and not INTERPRETER and _triton_knobs is not None
        # every parameter after the tensors, in the kernel's order (the launcher takes all)
        self.tail = self.scalars + tuple(constexprs[n] for n in names) if names is not None else ()

    def __call__(self, *tensors):
        if self.direct and DIRECT_LAUNCH:
            ptrs = [t.data_ptr() for t in tensors]
            acc = 0
            for p in ptrs:
                acc |= p
            align = True if not acc & 15 else tuple([not p & 15 for p in ptrs])
            device = current_cuda_device()
            entry = self._entries.get((device, align))
            if entry is not None:
                try:
                    return _launch_compiled(entry, self.grid, self.grid3, current_cuda_stream(device), ptrs,
                                            tensors, self.tail)
                except Exception as exc:   # noqa: BLE001  the JIT below reports a real error again
                    self._direct_failed(entry, exc)
                self._jit(tensors)
                return None
            return self._first(tensors, ptrs, align, device)
        self._jit(tensors)
        return None

    def _first(self, tensors, ptrs, align, device):
        """This launcher's first direct launch on (``device``, ``align``): the kernel another
        launcher holds for the same shared key (``_shared_key``) launches directly; else the
        JIT compiles it and it is held here and shared."""
        key = self._shared_key(device, align, tensors)
        held = _shared_get(key) if key is not None else None
        if held is not None:
            entry = held[1]
            self._entries[(device, align)] = entry
            try:
                return _launch_compiled(entry, self.grid, self.grid3, current_cuda_stream(device), ptrs, tensors,
                                        self.tail)
            except Exception as exc:   # noqa: BLE001  the JIT below reports a real error again
                self._direct_failed(entry, exc, stacklevel=4)
            self._jit(tensors)
            return None
        entry = _compiled_entry(self._jit(tensors))
        if entry is not None:
            self._entries[(device, align)] = entry
            if key is not None:
                _share(key, self.fn, entry)
        return None

    def _shared_key(self, device, align, tensors):
        """What the compiled kernel of a launch depends on, for ``_shared_entries``: the kernel,
        the constexprs and launch options (each value with its class and text: Triton keys a
        constexpr by its text, so ``True`` and ``1``, or ``0.0`` and ``-0.0``, which compare
        equal, compile apart), each scalar's specialization class (``_scalar_class``), each
        tensor's dtype and device, the current device and the pointers' alignment. None
        (nothing shared) where a part has no rule or is not hashable."""
        try:
            items = sorted(self.kwargs.items())
            key = (id(self.fn), device, align, tuple([(t.dtype, t.get_device()) for t in tensors]),
                   tuple(map(_scalar_class, self.scalars)),
                   tuple([k for k, _ in items]), constexpr_key(tuple([v for _, v in items])))
            hash(key)
        except Exception:   # noqa: BLE001  no rule, unhashable, a value whose hash or text raises
            return None
        return key

    def _direct_failed(self, entry, exc, stacklevel=3):
        self.direct = False
        import warnings
        warnings.warn(f"tilefuse: launching {entry[3].name} directly failed ({exc!r}); its launches go "
                      f"through Triton's JIT from now on", RuntimeWarning, stacklevel=stacklevel)

    def _jit(self, tensors):
        global _jit_launches
        _jit_launches += 1
        return self.fn[self.grid](*tensors, *self.scalars, **self.kwargs)


class SpecializingLauncher:
    """One @triton.jit or @gluon.jit kernel launched with arguments that change from call to
    call (tensors, integers, TMA tensor descriptors), its trailing constexprs given per call
    and its launch options fixed: ``launcher(grid, args, constexprs)`` launches
    ``fn[grid](*args, **dict(zip(names, constexprs)), **options)``.

    Where CompiledLauncher fixes everything but the tensors, this one looks a compiled kernel
    up by the specialization Triton computes from the arguments (``specialization``): a
    tensor's dtype, 16-byte alignment and device, an integer's ``== 1``, divisibility by 16
    and width, a descriptor's dtype, block, layout, padding and the same of its shape and strides; with
    the current device and the constexprs. The first launch of each key goes through the JIT
    (which compiles and returns the kernel), later ones hand it to ``_launch_compiled``: the
    JIT's binding and specialization cost tens of microseconds a launch on the H200 host
    (benchmarks/results/2026-12-03-h200-ac run 3: a ws_rows launch took 73-76 us, the JIT's
    run about 50 of them). Descriptors are passed to the compiled kernel's launcher as they
    are (it builds the CUtensorMap, as for the JIT), tensors as their addresses.

    The key is at least as fine as Triton's own: a kernel compiled for one specialization
    never runs arguments of another. What the direct route skips, and its fallback to the JIT
    when a direct launch raises, are CompiledLauncher's. The JIT runs every launch under the
    interpreter, and for a kernel whose constexprs are not its trailing parameters."""

    __slots__ = ("fn", "arg_names", "n_const", "options", "direct", "_entries")

    def __init__(self, fn, **options):
        self.fn = fn
        self.options = options
        self.arg_names = tuple(fn.arg_names)
        # the JIT knows its constexprs (the interpreter's function does not: there the caller's
        # count is taken as it is)
        const_index = getattr(fn, "constexprs", None)
        n = len(self.arg_names)
        trailing = const_index is not None and sorted(const_index) == list(range(n - len(const_index), n))
        self.n_const = len(const_index) if const_index is not None else None
        self.direct = trailing and not INTERPRETER and _triton_knobs is not None
        self._entries: dict = {}

    def __call__(self, grid, args: tuple, constexprs: tuple):
        if self.direct and DIRECT_LAUNCH:
            device = current_cuda_device()
            try:
                key = (device, constexpr_key(constexprs), *map(specialization, args))
            except TypeError:   # an argument kind without a rule: the JIT decides
                self._jit(grid, args, constexprs)
                return None
            return self._keyed(device, key, grid, args, constexprs)
        self._jit(grid, args, constexprs)
        return None

    def launch_held(self, key, grid, args: tuple, constexprs: tuple) -> bool:
        """``launch_keyed``'s direct launch, where the kernel of ``key`` is held: True; False,
        launching nothing, where it is not (or launches go through the JIT). A caller whose
        first launch of a key needs other arguments (descriptors built and checked, where
        later launches pass cheaper ones) tries this first."""
        if not (self.direct and DIRECT_LAUNCH):
            return False
        device = current_cuda_device()
        entry = self._entries.get((device, key))
        return entry is not None and self._direct(entry, device, grid, args, constexprs)

    def launch_keyed(self, key, grid, args: tuple, constexprs: tuple):
        """``self(grid, args, constexprs)`` with the kernel looked up by the caller's ``key``
        instead of the arguments' specialization: a caller that has fixed every argument's
        metadata (its shapes, strides, dtypes, integers, constexprs) keys it by that, or by
        their specialization, and the pointers' 16-byte alignment. The key must determine the
        specialization; the first launch of a key goes through the JIT with ``args`` as given
        (real descriptors)."""
        if self.direct and DIRECT_LAUNCH:
            device = current_cuda_device()
            return self._keyed(device, (device, key), grid, args, constexprs)
        self._jit(grid, args, constexprs)
        return None

    def _direct(self, entry, device, grid, args, constexprs) -> bool:
        """Launch ``entry`` (a held compiled kernel) directly: True; False where that raised
        (with a warning; every later launch goes through the JIT)."""
        grid3 = tuple(grid) + (1,) * (3 - len(grid))
        launch_args = [a.data_ptr() if isinstance(a, torch.Tensor) else a for a in args]
        try:
            _launch_compiled(entry, grid, grid3, current_cuda_stream(device), launch_args, args, constexprs)
            return True
        except Exception as exc:   # noqa: BLE001  the JIT reports a real error again
            self.direct = False
            import warnings
            warnings.warn(f"tilefuse: launching {entry[3].name} directly failed ({exc!r}); its "
                          f"launches go through Triton's JIT from now on", RuntimeWarning, stacklevel=3)
            return False

    def _keyed(self, device, key, grid, args, constexprs):
        entry = self._entries.get(key)
        if entry is not None and self._direct(entry, device, grid, args, constexprs):
            return None
        compiled = self._jit(grid, args, constexprs)
        if entry is None:
            entry = _compiled_entry(compiled)
            if entry is not None:
                self._entries[key] = entry
        return None

    def _jit(self, grid, args, constexprs):
        global _jit_launches
        _jit_launches += 1
        if self.n_const is not None and self.n_const != len(constexprs):
            raise TypeError(f"{getattr(self.fn, '__name__', self.fn)}: {len(constexprs)} constexprs given, the kernel "
                            f"has {self.n_const}")
        names = self.arg_names[len(self.arg_names) - len(constexprs):]
        return self.fn[grid](*args, **dict(zip(names, constexprs)), **self.options)


@functools.lru_cache(maxsize=None)
def specializing_launcher(fn, **options) -> SpecializingLauncher:
    """The one SpecializingLauncher of ``fn`` with these launch options (num_warps, ...)."""
    return SpecializingLauncher(fn, **options)


def _int_specialization(v: int):
    return (v == 1, v % 16 == 0, -0x80000000 <= v <= 0x7FFFFFFF, v < 1 << 63)


def specialization(arg):
    """What of one kernel argument selects a compiled kernel in Triton's JIT (triton/runtime/
    jit.py and backends/compiler.py in 3.6 and 3.8: a pointer on its dtype and 16-byte
    alignment, an integer on ``== 1``, divisibility by 16 and its type's width, a tensor
    descriptor on its dtype, block, layout and padding; its shape and strides are integers
    passed beside it), or finer. TypeError for an argument kind the launcher does not know.

    A tensor's (or a descriptor's base's) device is in it too: the JIT refuses a pointer the
    GPU cannot read (a CPU tensor's) on every launch, the direct route does not look, so a
    tensor of another device than the kernel's launches took must go through the JIT again
    (it raises there) rather than reach a compiled kernel as an address (an illegal memory
    access: benchmarks/results/2026-12-04-h200-aj run 8)."""
    cls = arg.__class__
    if cls is int:
        return _int_specialization(arg)
    if isinstance(arg, torch.Tensor):
        return (arg.dtype, arg.data_ptr() % 16 == 0, arg.get_device())
    if arg is None or cls is bool or cls is float:
        return (cls, arg) if cls is bool or arg is None else cls
    base = getattr(arg, "base", None)
    if isinstance(base, torch.Tensor) and hasattr(arg, "block_shape"):
        return (cls, base.dtype, base.data_ptr() % 16 == 0, base.get_device(), tuple(arg.block_shape),
                getattr(arg, "layout", None), getattr(arg, "padding", None), tuple(map(_int_specialization, arg.shape)),
                tuple(map(_int_specialization, arg.strides)))
    raise TypeError(f"specialization: no rule for a {cls.__name__} argument")


def _trailing_constexpr_names(fn, n_scalars: int, constexprs: dict):
    """The constexpr parameter names of ``fn`` in order when its parameters are tensors, then
    ``n_scalars`` scalars, then exactly the constexprs given; else None (launch by the JIT)."""
    names = getattr(fn, "arg_names", None)
    const_index = getattr(fn, "constexprs", None)     # indices of the constexpr parameters
    if names is None or const_index is None:
        return None
    n_const = len(constexprs)
    first = len(names) - n_const
    if first - n_scalars < 0 or sorted(const_index) != list(range(first, len(names))):
        return None
    tail_names = list(names[first:])
    return tail_names if set(tail_names) == set(constexprs) else None


def _compiled_entry(kernel):
    """(launcher, function handle, packed metadata, kernel) of what ``fn[grid](...)`` returned,
    or None unless it is a loaded CompiledKernel (the interpreter returns None, a cache hook
    may skip the launch). Triton 3.6 and 3.8: triton/compiler/compiler.py, CompiledKernel
    (``run`` is the driver's launcher, ``function`` the loaded CUfunction)."""
    try:
        run, function, packed = kernel.run, kernel.function, kernel.packed_metadata
        kernel.launch_metadata  # noqa: B018  (required below when launch hooks are set)
    except AttributeError:
        return None
    if function is None or not callable(run):
        return None
    return run, function, packed, kernel


_HOOK_CHAIN = getattr(_triton_knobs, "HookChain", None)


def _launch_compiled(entry, grid, grid3, stream, ptrs, tensors, tail):
    """Launch a compiled kernel the way the JIT does once it has the kernel.

    Triton 3.6 and 3.8, triton/runtime/jit.py, JITFunction.run, after "# launch kernel"::

        launch_metadata = kernel.launch_metadata(grid, stream, *bound_args.values())
        kernel.run(grid_0, grid_1, grid_2, stream, kernel.function, kernel.packed_metadata,
                   launch_metadata, knobs.runtime.launch_enter_hook,
                   knobs.runtime.launch_exit_hook, *bound_args.values())

    ``bound_args`` are all the kernel's parameters, constexprs included (the launcher drops
    them: backends/nvidia/driver.py, make_launcher in 3.6, annotate_arguments in 3.8);
    CompiledKernel.__getitem__(grid) builds the same call. Two differences, both leaving the
    launch identical:
    - pointers are passed as the integers ``data_ptr()`` returns. The launcher takes an int as
      the device address as it is (3.6: getPointer in the generated launcher; 3.8:
      extractPointer in driver.c) and skips the cuPointerGetAttribute call it makes for a
      tensor, which returns the same address for device memory;
    - with no launch hooks registered (knobs.runtime.launch_*_hook are HookChains with no
      calls, or None) the hooks and launch_metadata are passed as None, which the launcher
      skips (3.6: ``if (launch_enter_hook != Py_None)``; 3.8: launchHook), instead of building
      the metadata for empty chains. With hooks registered, the tensors and metadata are
      passed as the JIT passes them (profilers read tensor arguments from the metadata).
    """
    run, function, packed, kernel = entry
    runtime = _triton_knobs.runtime
    enter, leave = runtime.launch_enter_hook, runtime.launch_exit_hook
    if (enter is None or (enter.__class__ is _HOOK_CHAIN and not enter.calls)) and \
            (leave is None or (leave.__class__ is _HOOK_CHAIN and not leave.calls)):
        run(grid3[0], grid3[1], grid3[2], stream, function, packed, None, None, None, *ptrs, *tail)
    else:
        args = (*tensors, *tail)
        run(grid3[0], grid3[1], grid3[2], stream, function, packed, kernel.launch_metadata(grid, stream, *args),
            enter, leave, *args)
