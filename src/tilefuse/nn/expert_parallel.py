"""``ExpertParallelGLUMLP``: the expert MLPs of an MoE layer spread over the ranks of a
torch.distributed process group (expert parallelism), tokens exchanged by all-to-all.

Rank r of W owns the contiguous experts [r E/W, (r+1) E/W) as a ``GroupedGLUMLP`` of E/W
experts. A forward takes this rank's tokens with their global expert ids and router
probabilities, in any order, and returns their outputs in that order:

1. sort the tokens by expert (stable argsort on the device) and count them per expert;
2. exchange the counts (one ``all_to_all_single`` of W x (E/W + 8) integers on the device:
   the counts, the out-of-range ids, the module (E, H, F, dtype) and the call's flags, which
   the ranks must agree on) and copy the split sizes to the host: ``all_to_all_single`` takes
   them as Python lists, the module's one host synchronization of the forward (a module's first
   forward also all-gathers the ranks' modules to the host: ``_agree``, which makes the count
   exchange, sized by E/W, safe to run);
3. dispatch x and probs (probs in float32 on every rank: ``all_to_all_single`` with those
   splits);
4. on the receiving rank, put the received rows in local-expert order (the blocks arrive
   by source rank, each sorted by expert: a permutation built from the count matrix, no sort)
   and run ``grouped_glu_mlp`` on the local experts;
5. put the outputs back in arrival order, return them with the reverse ``all_to_all_single``
   and un-permute them to the caller's token order.

The backward runs the transposed collectives (dy to the experts' ranks, dx and dprobs back),
with the split sizes saved by the forward: no host synchronization of the module's own (the
local ``grouped_glu_mlp`` adds its path's: with fp16 / fp32 experts ``torch._grouped_mm``
reads the offsets on the host, at level 0 the composition the counts; docs/expert_parallel.md).
Every permutation is a
gather whose backward is the gather by the inverse permutation (no scatter-add, no atomics:
deterministic). The backward is built from the same differentiable pieces, so a double
backward (``create_graph=True``) runs through it, its collectives transposed once more.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import warnings

import torch
import torch.distributed as dist
from torch import nn

from .. import policy
from ..utils import check_tensor, fx_module_node, fx_proxy_in
from .grouped_mlp import DEFAULT_GLU_INTERLEAVE, GroupedGLUMLP, check_expert_args, record_values

_WHERE = "ExpertParallelGLUMLP"
# The parameter dtypes as numbers the ranks compare (ExpertParallelGLUMLP._module_row).
_DTYPE_CODES = {torch.float32: 0, torch.bfloat16: 1, torch.float16: 2}
# The state dict's record of the experts it holds: (num_experts, world size, rank) as int64.
SHARD_KEY = "expert_shard"


def check_same_modules(rows: list[tuple[int, ...]]) -> None:
    """The ValueError every rank raises when the ranks' module rows (``_module_row``, one per
    rank, as a collective brought them) differ."""
    if len(set(rows)) > 1:
        raise ValueError(f"{_WHERE}: the ranks of the process group hold different modules: per rank "
                         f"(num_experts, hidden_size, ffn_hidden_size, dtype code) "
                         + ", ".join(f"rank {r}: {row}" for r, row in enumerate(rows)))


# --- collectives -------------------------------------------------------------------------------

def all_to_all(x: torch.Tensor, output_splits: list[int], input_splits: list[int], group) -> torch.Tensor:
    """Rows ``input_splits[r]`` of ``x`` (in rank order) to rank r; returns the rows received,
    ``output_splits[s]`` from rank s, in rank order. Not differentiable (``AllToAll`` is)."""
    x = x.contiguous()
    out = x.new_empty((sum(output_splits), *x.shape[1:]))
    dist.all_to_all_single(out, x, output_split_sizes=output_splits, input_split_sizes=input_splits, group=group)
    return out


class AllToAll(torch.autograd.Function):
    """``all_to_all`` with its transpose as the backward (the splits swapped). The backward is
    itself an ``AllToAll``, so a double backward (``create_graph=True``: a gradient penalty)
    differentiates through it; a plain ``all_to_all`` there would return a gradient without
    history, and the second backward would drop every term that flows through it.

    Our own rather than ``torch.distributed.nn.functional.all_to_all_single``: that one warns
    (FutureWarning) on every call from torch 2.13 on, and its replacement in
    ``torch.distributed._functional_collectives`` is private API."""

    @staticmethod
    def forward(ctx, x, output_splits, input_splits, group):
        ctx.splits, ctx.group = (output_splits, input_splits), group
        return all_to_all(x, output_splits, input_splits, group)

    @staticmethod
    def backward(ctx, grad):
        output_splits, input_splits = ctx.splits
        return AllToAll.apply(grad, input_splits, output_splits, ctx.group), None, None, None


class Gather(torch.autograd.Function):
    """``x[index]`` along dim 0 for a permutation ``index`` whose inverse is ``inverse``: the
    backward is ``grad[inverse]``, a ``Gather`` itself (autograd's index backward would
    scatter-add), so a double backward's permutations are gathers too."""

    @staticmethod
    def forward(ctx, x, index, inverse):
        ctx.save_for_backward(index, inverse)
        return x.index_select(0, index)

    @staticmethod
    def backward(ctx, grad):
        index, inverse = ctx.saved_tensors
        return Gather.apply(grad, inverse, index), None, None


def _inverse(perm: torch.Tensor) -> torch.Tensor:
    """The inverse of a permutation of [0, n) (a scatter of unique indices: deterministic)."""
    return torch.empty_like(perm).scatter_(0, perm, torch.arange(perm.numel(), device=perm.device))


def _exclusive_cumsum(t: torch.Tensor) -> torch.Tensor:
    return torch.cumsum(t, 0) - t


@dataclasses.dataclass
class Dispatch:
    """Where this rank's tokens go and where the received ones come from (one forward).

    ``order`` / ``inverse`` (T,): send position -> token / token -> send position (tokens
    sorted by global expert). ``send_splits`` / ``recv_splits``: rows sent to / received from
    each rank (host lists). ``local_order`` / ``local_inverse`` (R,): local-expert-sorted
    position -> received row / received row -> sorted position. ``tokens_per_expert`` (E/W,)
    int64 on the device."""

    order: torch.Tensor
    inverse: torch.Tensor
    send_splits: list[int]
    recv_splits: list[int]
    local_order: torch.Tensor
    local_inverse: torch.Tensor
    tokens_per_expert: torch.Tensor


def exchange_counts(send: torch.Tensor, group) -> torch.Tensor:
    """The count exchange: row r of ``send`` (W, C) int64 to rank r; returns (W, C), row s
    from rank s."""
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send, group=group)
    return recv


@functools.lru_cache(maxsize=64)
def _agree_rows(values: tuple[int, ...], device: torch.device) -> torch.Tensor:
    """``values`` as a (1, n) int64 tensor on ``device``, made once per distinct row (a module's
    row and its call's flags take few values): a tensor made from a Python list is a blocking
    copy from pageable host memory, a host sync beside the exchange's own; only read after."""
    return torch.tensor([values], dtype=torch.int64, device=device)


def plan_dispatch(expert_ids: torch.Tensor, n_experts: int, world: int, group, flags: tuple[int, ...] = (),
                  module: tuple[int, ...] = ()) -> Dispatch:
    """Sort, count and exchange counts for one forward (no autograd). The one host
    synchronization: the split sizes (and the ranks' counts of out-of-range ids) copied to the
    host in one transfer after the count exchange. Out-of-range ids are counted on the device
    and exchanged with the counts, so every rank raises the same ValueError, none is left
    waiting in a collective. ``module``: the module's row (``_module_row``: E, H, F, dtype
    code; the dispatch's byte counts depend on them) and ``flags``: this call's values that
    must agree across the ranks (``ExpertParallelGLUMLP._flags``: which of the backward's
    collectives this rank will run), both sent with the counts; ranks that disagree on either
    all raise the same ValueError (``check_same_modules``, or the flags').
    Every rank must pass equally long ``module`` and ``flags``, and the same ``n_experts``:
    the exchange is W x (E/W + 1 + len(module) + len(flags)) integers."""
    device, n_local = expert_ids.device, n_experts // world
    ids = expert_ids.long()
    valid = (ids >= 0) & (ids < n_experts)
    # Out-of-range ids go to bucket E (sorted last, sent nowhere: the forward raises first).
    buckets = torch.where(valid, ids, n_experts)
    order = torch.argsort(buckets, stable=True)
    counts = torch.zeros(n_experts + 1, dtype=torch.int64, device=device)
    counts.scatter_add_(0, buckets, torch.ones_like(buckets))
    # Row r: this rank's counts for rank r's experts, its number of out-of-range ids, its module
    # row and its flags.
    agree = tuple(int(v) for v in (*module, *flags))
    n_agree = len(agree)
    send = torch.cat([counts[:n_experts].view(world, n_local), counts[n_experts:].expand(world, 1),
                      _agree_rows(agree, device).expand(world, n_agree)], 1)
    recv = exchange_counts(send, group)
    recv_counts = recv[:, :n_local]                       # (source rank, local expert)
    host = torch.cat([send[:, :n_local].sum(1), recv_counts.sum(1), recv[:, n_local],
                      recv[:, n_local + 1:].reshape(-1)]).tolist()
    send_splits, recv_splits, bad = host[:world], host[world:2 * world], host[2 * world:3 * world]
    rank_agree = [tuple(host[3 * world + r * n_agree:3 * world + (r + 1) * n_agree]) for r in range(world)]
    check_same_modules([row[:len(module)] for row in rank_agree])
    rank_flags = [row[len(module):] for row in rank_agree]
    if len(set(rank_flags)) > 1:
        raise ValueError(f"{_WHERE}: the ranks of the process group must call forward alike: with grad mode "
                         f"on, x requiring grad on all ranks or none, probs too, and the output requiring grad "
                         f"(x, probs or a local expert parameter requiring grad) on all ranks or none (the "
                         f"backward's all-to-alls pair up by them): per rank (x, probs, output) "
                         + ", ".join(f"rank {r}: {f}" for r, f in enumerate(rank_flags)))
    if any(bad):
        where = ", ".join(f"rank {r}: {n}" for r, n in enumerate(bad) if n)
        raise ValueError(f"{_WHERE}: expert_ids must be global expert indices in [0, {n_experts}); "
                         f"ids outside it per rank of the process group: {where}")

    # Received rows come in blocks (source s, local expert e), row-major; the experts' rows
    # must be in blocks (e, s). Received row i of block (s, e) goes to
    # dst_start[s, e] + (i - src_start[s, e]).
    n_recv = sum(recv_splits)
    src_start = _exclusive_cumsum(recv_counts.reshape(-1)).view(world, n_local)
    dst_start = _exclusive_cumsum(recv_counts.t().reshape(-1)).view(n_local, world).t()
    shift = torch.repeat_interleave((dst_start - src_start).reshape(-1), recv_counts.reshape(-1),
                                    output_size=n_recv)
    local_inverse = torch.arange(n_recv, device=device) + shift
    return Dispatch(order, _inverse(order), send_splits, recv_splits, _inverse(local_inverse), local_inverse,
                    recv_counts.sum(0))


# --- the module --------------------------------------------------------------------------------

def _group_of(process_group):
    """(group, rank, world size); TypeError / RuntimeError / ValueError naming process_group."""
    if not dist.is_available():
        raise RuntimeError(f"{_WHERE}: this torch build has no torch.distributed")
    # dist.new_group returns GroupMember.NON_GROUP_MEMBER (an int from torch 2.13 on) on the
    # processes it leaves out: not a ProcessGroup, but the non-member case below.
    sentinel = getattr(getattr(dist, "GroupMember", None), "NON_GROUP_MEMBER", None)
    non_member = sentinel is not None and type(process_group) is type(sentinel) and process_group == sentinel
    if not non_member and process_group is not None and not isinstance(process_group, dist.ProcessGroup):
        raise TypeError(f"{_WHERE}: process_group must be None (the world) or a torch.distributed "
                        f"ProcessGroup, got {type(process_group).__name__}")
    if not dist.is_initialized():
        raise RuntimeError(f"{_WHERE}: torch.distributed is not initialized; call "
                           "torch.distributed.init_process_group before building the module")
    group = dist.group.WORLD if process_group is None else process_group
    rank = -1 if non_member else dist.get_rank(group)
    if rank < 0:
        raise ValueError(f"{_WHERE}: process_group does not contain this process (rank "
                         f"{dist.get_rank()} of the world)")
    return group, rank, dist.get_world_size(group)


def _describe_shard(num_experts: int, world: int, rank: int) -> str:
    n_local = num_experts // world if world > 0 else 0
    return f"rank {rank} of {world}'s experts [{rank * n_local}, {(rank + 1) * n_local}) of {num_experts}"


def _check_tokens(x, expert_ids, probs, hidden: int, weight: torch.Tensor) -> None:
    """Argument checks before any collective (shapes, dtypes, devices: no value is read)."""
    for name, t in (("x", x), ("expert_ids", expert_ids), ("probs", probs)):
        check_tensor(_WHERE, name, t)
    if x.dtype != weight.dtype:
        raise TypeError(f"{_WHERE}: x is {x.dtype} but the experts' parameters are {weight.dtype}; "
                        "it must have their dtype")
    if x.dim() != 2 or x.shape[1] != hidden:
        raise ValueError(f"{_WHERE}: x must be (T, H) with H = hidden_size = {hidden}, got shape {tuple(x.shape)}")
    n_tokens = x.shape[0]
    if expert_ids.dtype not in (torch.int32, torch.int64):
        raise TypeError(f"{_WHERE}: expert_ids must be int32 or int64 (global expert indices), got {expert_ids.dtype}")
    if probs.dtype not in (torch.float32, x.dtype):
        raise TypeError(f"{_WHERE}: probs must be float32 or x's dtype {x.dtype}, got {probs.dtype}")
    for name, t in (("expert_ids", expert_ids), ("probs", probs)):
        if tuple(t.shape) != (n_tokens,):
            raise ValueError(f"{_WHERE}: {name} must be (T,) with T = x.shape[0] = {n_tokens}, "
                             f"got shape {tuple(t.shape)}")
    for name, t in (("x", x), ("expert_ids", expert_ids), ("probs", probs)):
        if t.device != weight.device:
            raise ValueError(f"{_WHERE}: {name} is on {t.device} but the experts' parameters are on {weight.device}")


class ExpertParallelGLUMLP(nn.Module):
    """The E expert MLPs of an MoE layer over the W ranks of a process group: rank r holds
    experts [r E/W, (r+1) E/W) and tokens travel to their expert's rank and back by
    ``all_to_all_single`` (docs/expert_parallel.md).

    Args:
        num_experts: E, the global number of experts; a positive multiple of the group's
            world size W.
        hidden_size, ffn_hidden_size, activation, glu_layout, glu_interleave, bias, recipe,
            device, dtype: as ``GroupedGLUMLP`` (any recipe).
        process_group: the ranks sharing the experts (default: the world). torch.distributed
            must be initialized; on GPUs the backend is NCCL, on CPUs gloo.

    Parameters: ``experts``, a ``GroupedGLUMLP`` of the E/W local experts, in its layout
    (``experts.fc1_weight`` (E/W, 2F, H), ...): local expert j is global expert
    ``expert_offset + j``. Each rank initialises its own experts from its RNG; seed the ranks
    apart, or take the slices of a full module with ``from_grouped``.

    State dict: the local experts only (``experts.*``; a full checkpoint concatenates the
    ranks' parameters along dim 0, loaded into a ``GroupedGLUMLP`` of all E experts), and
    ``expert_shard``, a (3,) int64 tensor recording (num_experts, world size, rank) of the
    module that saved it. Local experts of equal shapes do not tell which rank's they are
    (rank 0's file loaded on every rank, or an E = 8, W = 4 shard loaded into E = 4, W = 2),
    so loading checks the record on each rank (no collective) and raises naming what differs,
    leaving the experts as they were. A state dict without the record (written before it
    existed, or assembled by hand) warns and reports ``expert_shard`` as a missing key, as
    ``GroupedGLUMLP`` treats a missing ``glu_layout``: ``strict=False`` loads it unchecked,
    ``strict=True`` (the default) raises after torch has copied the experts in, as for any
    missing key (the module then holds them unchecked: reload or rebuild it); add ``state["expert_shard"] = torch.tensor([E, W, r])``
    to declare whose experts it holds. A meta or fake record (deferred initialisation, memory
    estimates) holds no value: it loads with a warning. Not ``torch.distributed.checkpoint``'s
    save / load: the ranks' tensors share their names, so it keeps one rank's copy of each
    (docs/expert_parallel.md).

    Shapes (this rank's tokens, in any order; T may be 0 and may differ between ranks):
        forward(x (T, H) in the parameters' dtype, expert_ids (T,) int32/int64 global expert
        indices in [0, E), probs (T,) float32 or x's dtype) -> y (T, H) in x's dtype and
        token order: ``y_t = probs_t * MLP_{expert_ids_t}(x_t)`` exactly as
        ``tilefuse.grouped_glu_mlp`` defines it. Top-k routing: repeat each token k times
        (x, expert ids and probs of its k slots) and sum its k output rows.

    Differentiable in x, probs and the local parameters; probs travels in float32 (the op reads
    it in float32), so ranks may pass it in different dtypes, and its gradient comes back in
    the caller's. Every rank of the group must call forward, and run the backward through its
    output (and a double backward, ``create_graph=True``, through the gradients alike), so that
    every rank runs the same backward collectives: with grad mode on, x requiring grad on all
    ranks or on none, probs too, and the output requiring grad (x, probs or a local expert
    parameter requiring grad) on all ranks or on none. So ranks whose local experts are all
    frozen run beside ranks whose experts train when x or probs requires grad, and under
    ``torch.no_grad`` the ranks may differ in all of these. Both are checked: ranks whose calls
    differ there, or that hold different modules (E, H, F, dtype; compared in every forward's
    count exchange, so a rank whose experts were converted to another dtype is caught too),
    all raise the same ValueError instead of pairing mismatched collectives.

    A module holds one rank's experts: pickled (``torch.save(model)``) and loaded, or given
    another ``process_group``, it runs only as the rank it was built for, in a group of the
    size it was built for. Its next forward checks that on every rank (all raise the same
    ValueError otherwise): save and load each rank's own module or state dict, or take each
    rank's share of a full module with ``from_grouped``. That check is a collective: set
    another ``process_group`` on every rank of it (setting the group in use is a no-op).

    Synchronization: the module's one host synchronization per forward, the split sizes that
    ``all_to_all_single`` takes as Python lists (``output_split_sizes``,
    ``input_split_sizes``), copied after the counts are exchanged on the device; the backward
    reuses them (none). So the module is not CUDA-graph capturable, and under torch.compile
    it breaks the graph there. Expert ids outside [0, E) on any rank make every rank raise
    the same ValueError after that copy. Argument errors (shapes, dtypes) are raised before
    any collective, on the rank that has them.

    The path of the local ``grouped_glu_mlp`` (its tuning-table key holds E/W and this rank's
    received token count, bucketed) is chosen per call like ``GroupedGLUMLP``'s;
    ``tilefuse.tune(model, example_inputs)`` called on every rank makes all ranks hold the
    same table entries (rank 0 decides).

    Example (on each of W ranks, after ``torch.distributed.init_process_group``):
        >>> moe = ExpertParallelGLUMLP(64, 2048, 1408, device="cuda", dtype=torch.bfloat16)
        >>> y = moe(x, expert_ids, probs)      # x (T, 2048), expert_ids (T,), probs (T,)
    """

    def __init__(self, num_experts: int, hidden_size: int, ffn_hidden_size: int, *, activation: str = "swiglu",
                 glu_layout: str | None = None, glu_interleave: int | None = DEFAULT_GLU_INTERLEAVE,
                 bias: bool = False, recipe: str | None = None, process_group=None, device=None, dtype=None):
        super().__init__()
        check_expert_args(_WHERE, (("num_experts", num_experts), ("hidden_size", hidden_size),
                                   ("ffn_hidden_size", ffn_hidden_size)), activation, glu_layout, glu_interleave,
                          recipe, dtype, bias)   # before the group: a bad argument is named without one
        group, rank, world = _group_of(process_group)
        if num_experts % world:
            raise ValueError(f"{_WHERE}: num_experts = {num_experts} must be a multiple of the process group's "
                             f"world size {world} (each rank holds num_experts / world experts)")
        self.process_group, self.rank, self.world_size = group, rank, world
        self.num_experts, self.num_local_experts = num_experts, num_experts // world
        self.expert_offset = rank * self.num_local_experts
        self.hidden_size, self.ffn_hidden_size = hidden_size, ffn_hidden_size
        self._agreed = False   # whether the ranks were found to hold this module (_agree)
        self.experts = GroupedGLUMLP(self.num_local_experts, hidden_size, ffn_hidden_size, activation=activation,
                                     glu_layout=glu_layout, glu_interleave=glu_interleave, bias=bias, recipe=recipe,
                                     device=device, dtype=dtype)

    def __deepcopy__(self, memo):
        """A copy on the same process group (a communicator is not copied: torch refuses to),
        its parameters and buffers copied: ``copy.deepcopy(model)`` for an EMA or a frozen
        reference works as with other modules."""
        memo[id(self.process_group)] = self.process_group
        new = self.__class__.__new__(self.__class__)
        memo[id(self)] = new
        new.__dict__.update(copy.deepcopy(self.__dict__, memo))
        return new

    def __setattr__(self, name, value):
        """``module.process_group = group`` (None: the world), after construction: the next
        forward agrees with the group's ranks again (``_agree``), which checks that this rank
        and the group's size are the ones the module's experts were built for. That agreement
        is a collective, so another group must be set on every rank of it (on some ranks only,
        their next forward enters ``_agree``'s all-gather while the others enter the count
        exchange: a hang until the backend's timeout). Setting the group already in use
        changes nothing (no agreement), so it is safe on any subset of the ranks."""
        if name == "process_group" and "_agreed" in self.__dict__:
            value = _group_of(value)[0]
            if value is self.__dict__.get("process_group"):
                return
            self.__dict__["_agreed"] = False
            self.__dict__["_unbound"] = False
        super().__setattr__(name, value)

    def __getstate__(self):
        """Pickling (``torch.save(model)``): everything but the process group (torch cannot
        pickle a communicator); whether it was the world is kept (``__setstate__``). The rank
        and world size are kept: the module holds that rank's experts."""
        state = self.__dict__.copy()
        state["_pickled_world"] = self.process_group is dist.group.WORLD
        state["process_group"] = None
        return state

    def __setstate__(self, state):
        """Unpickling: a module that ran on the world runs on the world of the loading process
        (torch.distributed's default group, as ``process_group=None`` builds one); one built on
        another group gets no group: its forward raises until ``process_group`` is set. The
        loaded module agrees with the ranks again in its first forward (``_agree``): loaded on
        another rank than the one that saved it, or in a group of another size, every rank
        raises there instead of running another rank's experts."""
        world = state.pop("_pickled_world", True)
        self.__dict__.update(state)
        self.__dict__["_agreed"] = False
        self._unbound = not world
        if world and dist.is_available() and dist.is_initialized():
            self.process_group = dist.group.WORLD

    @classmethod
    def from_grouped(cls, mlp: GroupedGLUMLP, *, process_group=None) -> "ExpertParallelGLUMLP":
        """This rank's share of a ``GroupedGLUMLP`` holding all E experts: the same
        configuration, device, dtype and train / eval state, the local experts' parameters
        copied with their ``requires_grad`` (frozen experts stay frozen)."""
        if not isinstance(mlp, GroupedGLUMLP):
            raise TypeError(f"{_WHERE}.from_grouped: mlp must be a GroupedGLUMLP, got {type(mlp).__name__}")
        weight = mlp.fc1_weight
        new = cls(mlp.num_experts, mlp.hidden_size, mlp.ffn_hidden_size, activation=mlp.activation,
                  glu_layout=mlp.glu_layout, glu_interleave=mlp.glu_interleave, bias=mlp.fc1_bias is not None,
                  recipe=mlp.recipe, process_group=process_group, device=weight.device, dtype=weight.dtype)
        local = slice(new.expert_offset, new.expert_offset + new.num_local_experts)
        with torch.no_grad():
            for name, param in new.experts.named_parameters():
                source = getattr(mlp, name)
                param.copy_(source[local])
                param.requires_grad_(source.requires_grad)
        return new.train(mlp.training)

    def _shard(self) -> tuple[int, int, int]:
        """(num_experts, world size, rank): which experts this module holds (``SHARD_KEY``)."""
        return self.num_experts, self.world_size, self.rank

    @property
    def expert_shard(self) -> torch.Tensor:
        """The state dict's ``SHARD_KEY`` record as an attribute: torch.distributed.checkpoint's
        state-dict helpers (get_model_state_dict / set_model_state_dict) look every key of a
        nested module up by attribute."""
        return torch.tensor(self._shard(), dtype=torch.int64)

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        super()._save_to_state_dict(destination, prefix, keep_vars)
        destination[prefix + SHARD_KEY] = self.expert_shard

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        key = prefix + SHARD_KEY
        ours = self._shard()
        saved = state_dict.pop(key, None)
        refused = None
        if saved is None:
            # As GroupedGLUMLP's glu_layout: torch raises for a missing key under strict=True
            # and returns it under strict=False. The warning says why.
            missing_keys.append(key)
            warnings.warn(f"{_WHERE}: the state dict has no {key!r}, the record of which experts it holds, so it "
                          f"cannot be checked; this module holds {_describe_shard(*ours)}. Another rank's experts "
                          f"load without an error and give wrong results: add state[{key!r}] = "
                          f"torch.tensor({list(ours)}) to declare them", UserWarning, stacklevel=4)
        elif not isinstance(saved, torch.Tensor) or tuple(saved.shape) != (3,) or saved.is_floating_point():
            refused = (f"{_WHERE}: {key!r} must be a (3,) integer tensor (num_experts, world size, rank), "
                       f"got {saved!r}")
        elif (values := record_values(saved))[0] is None:
            warnings.warn(f"{_WHERE}: the state dict's {key!r} is a {values[1]} tensor without a value, so which "
                          f"experts it holds cannot be checked; this module holds {_describe_shard(*ours)}",
                          UserWarning, stacklevel=4)
        elif (recorded := tuple(values[0])) != ours:
            differ = ", ".join(f"{name} {a} != {b}" for name, a, b in zip(("num_experts", "world size", "rank"),
                                                                          recorded, ours) if a != b)
            refused = (f"{_WHERE}: the state dict holds {_describe_shard(*recorded)}, but this module holds "
                       f"{_describe_shard(*ours)} ({differ}). Load each rank's own state dict on that rank, or "
                       f"load a full checkpoint (the ranks' {prefix}experts parameters concatenated along dim 0, "
                       f"its glu_layout record taken once) into a "
                       f"GroupedGLUMLP of all experts and take each rank's share with "
                       f"ExpertParallelGLUMLP.from_grouped")
        if refused is not None:
            error_msgs.append(refused)
            # torch loads the children after this and raises only at the end: keep the local
            # experts as they were by giving them their own tensors to load.
            experts = prefix + "experts."
            # The tensors themselves: under assign=True torch then sets the same Parameter objects
            # (an optimizer built before the load keeps pointing at them); otherwise a self-copy.
            for name, t in (*self.experts.named_parameters(), *self.experts.named_buffers()):
                if experts + name in state_dict:
                    state_dict[experts + name] = t
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)

    def _module_row(self) -> tuple[int, ...]:
        """(E, H, F, dtype code): what the ranks' modules must agree on."""
        return (self.num_experts, self.hidden_size, self.ffn_hidden_size,
                _DTYPE_CODES.get(self.experts.fc1_weight.dtype, -1))

    def _agree(self, x: torch.Tensor) -> None:
        """Before the module's first count exchange (and the first after unpickling or a new
        ``process_group``): every rank holds the same module (``_module_row``), built for its
        rank of a group of this group's size, or every rank raises the same ValueError (a
        module pickled on rank 0 and loaded on every rank would run rank 0's experts everywhere;
        one from a larger world would fail inside a collective). The count exchange is sized by
        E / W, so ranks that differ there would pair mismatched collectives (an abort or a
        hang); once they agree, every count exchange carries the row and compares it
        (plan_dispatch), which catches a later change on some ranks (experts converted to
        another dtype) in a collective every rank runs. Hence once per module, whatever its
        dtype and device: a check that ran again on the ranks whose module changed would be a
        collective the others skip."""
        if self._agreed:
            return
        group = self.process_group
        mine = torch.tensor((*self._module_row(), self.rank, self.world_size), dtype=torch.int64, device=x.device)
        # Sized by the group (self.world_size may be another group's: the check below).
        world = dist.get_world_size(group)
        every = [torch.empty_like(mine) for _ in range(world)]
        dist.all_gather(every, mine, group=group)
        rows = [tuple(t.tolist()) for t in every]
        if any(row[-2:] != (r, world) for r, row in enumerate(rows)):
            built = ", ".join(f"rank {r}: rank {b} of {w} (experts [{b * (e // w)}, {(b + 1) * (e // w)}))"
                              for r, (e, *_, b, w) in enumerate(rows))
            raise ValueError(f"{_WHERE}: the modules do not match the ranks that run them: per rank of the "
                             f"process group (size {world}), the rank and group size its module was built for: "
                             f"{built}. A module "
                             f"saved on one rank (torch.save) and loaded on another, or in a group of another size, "
                             f"would run another rank's experts: load each rank's own module or state dict "
                             f"(load_state_dict), or take each rank's share of a GroupedGLUMLP holding all experts "
                             f"with ExpertParallelGLUMLP.from_grouped")
        check_same_modules([row[:-2] for row in rows])
        self._agreed = True

    def _flags(self, x: torch.Tensor, probs: torch.Tensor) -> tuple[int, int, int]:
        """What decides this rank's backward collectives, which must pair up across the ranks:
        the all-to-all returning y has a backward (dy to the experts' ranks) iff y requires
        grad, those dispatching x and probs (dx, dprobs back) iff x, resp. probs, requires grad;
        none without grad mode. The local parameters count only through y: a rank whose experts
        are all frozen runs the same collectives as one whose experts train when x or probs
        requires grad."""
        grad = torch.is_grad_enabled()
        params = any(p.requires_grad for p in self.experts.parameters())
        return (int(grad and x.requires_grad), int(grad and probs.requires_grad),
                int(grad and (x.requires_grad or probs.requires_grad or params)))

    def forward(self, x: torch.Tensor, expert_ids: torch.Tensor, probs: torch.Tensor) -> torch.Tensor:
        proxy = fx_proxy_in(x, expert_ids, probs)
        if proxy is not None:   # torch.fx.symbolic_trace: the module is one leaf node
            return fx_module_node(self, _WHERE, proxy, x, expert_ids, probs)
        if policy.eager_tracing():
            # the all-to-alls' split sizes are host values read from this call's routing: a
            # trace would hold them as constants, wrong for any other routing
            raise NotImplementedError(f"{_WHERE}: torch.jit.trace and make_fx cannot record this module (its "
                                      f"collectives' sizes come from the routing's values); trace around it, or "
                                      f"use torch.fx.symbolic_trace, where it is one leaf node")
        _check_tokens(x, expert_ids, probs, self.hidden_size, self.experts.fc1_weight)
        group = self.process_group
        if group is None and self.__dict__.get("_unbound"):
            raise ValueError(f"{_WHERE}: this module was unpickled from one built on a process group other than "
                             f"the world; set its process_group (a group of {self.world_size} ranks) first")
        self._agree(x)
        d = plan_dispatch(expert_ids, self.num_experts, self.world_size, group, self._flags(x, probs),
                          self._module_row())
        x_recv = AllToAll.apply(Gather.apply(x, d.order, d.inverse), d.recv_splits, d.send_splits, group)
        # probs in float32 on every rank (the op reads it in float32; its gradient returns in
        # the caller's dtype): ranks passing float32 and x's dtype exchange equal byte counts.
        p_recv = AllToAll.apply(Gather.apply(probs.float(), d.order, d.inverse), d.recv_splits, d.send_splits,
                                group)
        y_local = self.experts(Gather.apply(x_recv, d.local_order, d.local_inverse), d.tokens_per_expert,
                               Gather.apply(p_recv, d.local_order, d.local_inverse))
        y_recv = Gather.apply(y_local, d.local_inverse, d.local_order)
        y_sent = AllToAll.apply(y_recv, d.send_splits, d.recv_splits, group)
        return Gather.apply(y_sent, d.inverse, d.order)

    def extra_repr(self) -> str:
        return (f"num_experts={self.num_experts}, world_size={self.world_size}, rank={self.rank}, "
                f"local experts [{self.expert_offset}, {self.expert_offset + self.num_local_experts})")
