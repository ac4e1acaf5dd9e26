"""``tilefuse.tune(model, example_inputs)``: sweep the keys a model uses, ahead of time."""

from __future__ import annotations

import dataclasses
import threading
import warnings

import torch
import torch.distributed as dist

from .. import policy
from . import table
from .family import BASELINE, get_family
from .runner import check_sendable_timer, format_results, sweep_each, sweep_isolated
from .sweep import ROUNDS, SweepError, SweepResult, check_flags, check_rounds, covered_keys, default_device


def _tensors(obj) -> list[torch.Tensor]:
    """The tensors in ``obj``: a tensor, or lists, tuples, dicts (Hugging Face's ModelOutput
    is one) and dataclasses of them, nested."""
    if isinstance(obj, torch.Tensor):
        return [obj]
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        obj = [getattr(obj, f.name) for f in dataclasses.fields(obj)]
    if isinstance(obj, dict):
        obj = list(obj.values())
    if isinstance(obj, (list, tuple)):
        return [t for item in obj for t in _tensors(item)]
    return []


def _graph_leaves(outputs: list[torch.Tensor]) -> list[torch.Tensor]:
    """The leaf tensors requiring grad that ``outputs`` were computed from (their autograd
    graph's AccumulateGrad nodes): what a backward would reach, also tensors a plain callable
    closes over, which neither its parameters nor its inputs name."""
    leaves = [t for t in outputs if t.grad_fn is None]
    stack, seen = [t.grad_fn for t in outputs if t.grad_fn is not None], set()
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        variable = getattr(node, "variable", None)
        if isinstance(variable, torch.Tensor):
            leaves.append(variable)
        stack.extend(next_node for next_node, _ in node.next_functions)
    return leaves


def collect(model, example_inputs) -> dict[tuple[str, str], object]:
    """Run ``model`` once at level >= 2 and return ``(family, key) -> problem`` for every
    table lookup its tilefuse ops made: the forward, and the backward when an output requires
    grad (not under ``torch.no_grad``: an inference model's keys are its forward's). The
    gradients are computed with ``torch.autograd.grad`` with respect to the leaves of the
    outputs' graph: the model's parameters, the example inputs and any tensor the model
    closes over, so no ``.grad`` is touched. Outputs may be tensors or lists, tuples, dicts
    and dataclasses of them. The backward runs with the process-wide level (``set_level``)
    raised as well, since autograd's CUDA device thread sees no ``level`` block; other
    threads see that level while it runs.

    ``example_inputs``: a tensor, a tuple/list of positional arguments, or a dict of keyword
    arguments. The model runs as given (training or eval mode, on its device), so a forward
    with side effects (batch-norm statistics) has them once.
    """
    if isinstance(example_inputs, dict):
        args, kwargs = (), example_inputs
    elif isinstance(example_inputs, (tuple, list)):
        args, kwargs = tuple(example_inputs), {}
    else:
        args, kwargs = (example_inputs,), {}
    at = max(policy.get_level(), 2)
    with policy.level(at), table.collecting() as seen:
        outputs = [t for t in _tensors(model(*args, **kwargs)) if t.requires_grad]
        leaves = _graph_leaves(outputs)
        if outputs and leaves:
            # On CUDA the backward runs on autograd's device thread, which does not see the
            # level block (policy.level), and dyt looks its backward key up again there: the
            # process-wide level is raised for the backward and put back after it, exactly
            # (set_level's value, None where TILEFUSE_LEVEL / the default applied). Collects in
            # several threads run their backwards one at a time, each at its own level.
            with _backward_lock:
                global_level = policy._global_level
                policy.set_level(at)
                try:
                    torch.autograd.grad(outputs, leaves, grad_outputs=[torch.ones_like(t) for t in outputs],
                                        allow_unused=True)
                finally:
                    policy.set_level(global_level)
    return dict(seen)


# held by a collect's backward, which sets the process-wide level
_backward_lock = threading.Lock()


def tune(model, example_inputs, *, device=None, timer=None, rounds: int = ROUNDS,
         force: bool = False, record: bool = True, progress: bool = True,
         isolate: bool = False) -> list[SweepResult]:
    """Sweep every table key ``model`` uses that is not covered yet; return the results.

    Runs the model once (see ``collect``) to learn its keys, then sweeps the ones the table
    of ``device`` does not cover (all of them with ``force``) on ``device`` (default: the
    current CUDA device), records the winners in that GPU's cache file, prints each key's
    result lines as it finishes ("swept:" / "timed:", or "aborted:": a sweep stopped midway
    keeps its evidence) and, with ``progress``, progress bars and a result table at the end.
    Call it before training, never inside a step: a sweep compiles and times many configs.

    In a ``torch.distributed`` job every rank must call it. The ranks' keys are pooled, rank 0
    decides which are uncovered, the ranks sweep them in parallel (one key per rank at a time,
    each on its own GPU), and rank 0's final entry for every pooled key is broadcast and
    registered on all ranks, so all ranks run the same kernels whatever their local cache
    files hold. The collectives wait for the slowest rank's sweeps: give the process group a
    timeout longer than the sweep.

    ``isolate``: the keys are swept in a child process (as `tilefuse tune` sweeps them,
    runner.sweep_isolated), so a candidate that crashes the process, or loses its CUDA
    context, aborts its own key (a SweepError saying how) instead of ending or poisoning the
    caller's process; a fresh child sweeps the keys after it. The model runs here either way
    (its keys are collected in this process). A ``timer`` must then be picklable by
    reference to an importable module (not the running script's ``__main__``).

    Raises ``SweepError`` if any key aborted (the others are still recorded); TypeError or
    ValueError naming ``model`` (a callable), ``rounds`` (an int >= 1), ``force``, ``record``,
    ``progress`` or ``isolate`` (bools), or ``timer`` (picklable, with ``isolate``) before
    anything runs.
    """
    if not callable(model):
        raise TypeError(f"tune: model must be callable (a module or function), got {type(model).__name__}")
    check_rounds(rounds, "tune")
    check_flags("tune", force=force, record=record, progress=progress, isolate=isolate)
    if isolate:
        check_sendable_timer(timer, "tune")
    seen = collect(model, example_inputs)
    if not seen:
        warnings.warn("tilefuse.tune: the model made no tuning-table lookup (it uses no tilefuse "
                      "op, or kernels cannot run on its device); nothing to tune", stacklevel=2)
    options = dict(device=device, timer=timer, rounds=rounds, record=record, progress=progress)
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        results, errors = _sweep_distributed(seen, force, options, isolate)
    else:
        covered = covered_keys(device)
        todo = [(family, problem) for (family, key), problem in seen.items()
                if force or (family, key) not in covered]
        results, errors = _sweep(todo, options, isolate)
    if progress and (results or errors):
        print(format_results(results, errors))
    if errors:
        raise SweepError(f"{len(errors)} key(s) aborted, nothing recorded for them:\n"
                         + "\n".join(str(e) for e in errors))
    return results


def _sweep(items: list, options: dict, isolate: bool):
    """sweep_each, or with ``isolate`` sweep_isolated on ``options``' device (a child process)."""
    if not isolate:
        return sweep_each(items, **options)
    options = dict(options)
    device = options.pop("device")
    # this process's current device: the child, a fresh process, would take its own (cuda:0)
    return sweep_isolated(items, [str(default_device() if device is None else device)], **options)


def _sweep_distributed(seen: dict, force: bool, options: dict, isolate: bool = False):
    rank, world = dist.get_rank(), dist.get_world_size()
    gathered: list = [None] * world
    dist.all_gather_object(gathered, list(seen.items()))
    pooled: dict = {}
    for rank_items in gathered:
        for family_key, problem in rank_items:
            pooled.setdefault(family_key, problem)

    todo = [None]
    if rank == 0:   # against the table rank 0's sweeps record into
        covered = covered_keys(options["device"])
        todo = [sorted(fk for fk in pooled if force or fk not in covered)]
    dist.broadcast_object_list(todo, src=0)
    mine = [(family, pooled[(family, key)]) for family, key in todo[0][rank::world]]
    results, errors = _sweep(mine, options, isolate)

    gathered = [None] * world
    dist.all_gather_object(gathered, ([(r.family, r.key, r.entry()) for r in results],
                                      [str(e) for e in errors]))
    final = [None]
    if rank == 0:
        # Whole entries, winner and measured: a level-3 variant is installed only with its
        # validation record (So2Family.check_entry), and its training use reads that record.
        winners = {}
        for family, key in pooled:
            entry = table.get_entry(family, key)
            if entry is not None:
                winners[(family, key)] = {"winner": entry if entry == BASELINE else
                                          get_family(family).config_to_dict(entry),
                                          "measured": table.get_measured(family, key) or {}}
        for swept, _ in gathered:
            winners.update({(family, key): raw for family, key, raw in swept})
        final = [winners]
    dist.broadcast_object_list(final, src=0)
    if options["record"]:   # record=False changes no table, as in one process
        for (family, key), raw in final[0].items():
            table.register_entries(family, {key: raw})
    errors = [SweepError(message) for _, messages in gathered for message in messages]
    return results, errors
