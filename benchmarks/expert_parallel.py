"""Does expert parallelism over two GPUs keep grouped_glu_mlp's time per token within 1.3x of one GPU holding all experts, all-to-all included, at the spec's shape 2?

Issue 20's throughput question. The spec's shape 2 (64 experts, 32768 tokens in all, H 2048,
F 1408, bf16, swiglu, glu_interleave 32; ``--shape`` to change it) on W ranks (default 2, one
GPU each, NCCL with NVLink multicast off: ``NCCL_NVLS_ENABLE=0`` is set unless already set):

- ``expert parallel``: ``tilefuse.nn.ExpertParallelGLUMLP`` over the W ranks (E/W experts
  each); each rank holds T/W of the tokens, routed uniformly at random over the E experts
  (top-1: every row is one (token, expert) pair), and runs forward + backward
  (``torch.autograd.grad`` of y for x, probs and the parameters);
- ``one GPU``: one ``GroupedGLUMLP`` holding all E experts on all T tokens, with the same token
  work around it (stable sort by expert, gather, un-permute), every rank on its own GPU at once;
- ``one GPU, op only``: the op on tokens already sorted by expert (the spec's bar measures it).

Checked first, on every rank: the expert-parallel module's y, and the gradients of the rank's
x and probs, against one module holding every expert on the same tokens (``check_equivalent``); a mismatch, or any
provider failing on one rank, ends the run on every rank. Timing: the one harness
(``tilefuse.tuning.timing.interleaved``: warm-up, providers in rotating
rounds, medians), eager (the module synchronizes with the host once per forward, so it cannot
be captured in a CUDA graph), a fixed number of steps per sample so that every rank makes the
same collective calls, and a barrier before each sample so that no rank's sample waits for
another rank's previous provider. Then an instrumented run of ``--steps`` steps records CUDA
events around each collective of the module (the count exchange with its host copy, the
dispatch of x and probs, the combine of y, the backward's dy, dx and dprobs), so that the
all-to-all's share of the step is measured inside real steps.

    NCCL_NVLS_ENABLE=0 PYTHONPATH=src python3 benchmarks/expert_parallel.py [--ranks 2] [--shape 64x32768x2048x1408]
        [--rounds 7] [--steps 10] [--recipe fp8_block] [--json PATH]
    NCCL_NVLS_ENABLE=0 PYTHONPATH=src torchrun --nproc-per-node 2 benchmarks/expert_parallel.py   # the same
    PYTHONPATH=src python3 benchmarks/expert_parallel.py --tiny   # no GPU: gloo, Triton's interpreter, host clock

Prints (rank 0) the environment (torch, triton, GPUs), the shape and each rank's path (tuning
key and route of its local grouped_glu_mlp call), then a table: provider, ms per step [min -
max over rounds], tokens per second of all GPUs, tokens per second per GPU, time per token per
GPU against ``one GPU`` (the median over rounds of each round's ratio, each round's step the
slowest rank's; issue 20's target: <= 1.3); then per rank the instrumented step's
milliseconds and its collectives' (count exchange + host copy, dispatch, combine, backward
all-to-alls) with their share of the step. ``--json`` writes the same numbers.

Time: estimated 1-2 minutes on two H200 GPUs (the process start, the kernels' compilation and
7 rounds of 10 steps of ~10-25 ms per provider). ``--tiny``: ~20 s on a CPU (no
GPU; its numbers time the interpreter and mean nothing).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import traceback

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

TINY = "--tiny" in sys.argv
if TINY:
    os.environ.setdefault("TRITON_INTERPRET", "1")   # before tilefuse imports triton.language
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")       # NVLink multicast off (the device machines' rule)

import tilefuse  # noqa: E402
from tilefuse.nn import ExpertParallelGLUMLP, GroupedGLUMLP  # noqa: E402
from tilefuse.nn import expert_parallel  # noqa: E402
from tilefuse.ops.grouped_glu_mlp import op  # noqa: E402
from tilefuse.ops.grouped_glu_mlp.api import problem_for  # noqa: E402
from tilefuse.ops.grouped_glu_mlp.tune import DEFAULT_SHAPES, FAMILY  # noqa: E402
from tilefuse.tuning import timing  # noqa: E402
from tilefuse.tuning.sweep import poisoned_allocations  # noqa: E402
from tilefuse.utils import normwise_rel_error  # noqa: E402

TINY_SHAPE = (8, 256, 64, 32)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    e, t, h, f = DEFAULT_SHAPES[1]
    p.add_argument("--shape", default=f"{e}x{t}x{h}x{f}", help="EXPERTSxTOKENSxHxF, TOKENS over all ranks")
    p.add_argument("--ranks", type=int, default=2, help="processes to spawn (ignored under torchrun)")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--steps", type=int, default=10, help="steps per sample, and of the instrumented run")
    p.add_argument("--recipe", default=None, choices=[None, "fp8_block", "mxfp8", "nvfp4"])
    p.add_argument("--json", default=None, help="write the results here (rank 0)")
    p.add_argument("--tiny", action="store_true", help="CPU smoke run: gloo, interpreter, a small shape")
    args = p.parse_args(argv)
    if args.tiny:
        args.shape = "x".join(map(str, TINY_SHAPE))
        args.rounds, args.steps = min(args.rounds, 2), min(args.steps, 2)
    args.experts, args.tokens, args.hidden, args.ffn = (int(v) for v in args.shape.split("x"))
    return args


class RankTimer:
    """A timing.Timer for W ranks: the inner timer's samples with a fixed number of steps
    (CudaTimer with min_reps = max_reps, or WallTimer's one pass: every rank makes the same
    collective calls) and, before each sample, a synchronization and a barrier. A failure in a
    warm-up or a sample ends the run (``_or_exit``): timing.interleaved would drop the provider
    on this rank alone and go on, while the other ranks wait in its collectives for good."""

    def __init__(self, inner, device):
        self.inner, self.device = inner, device

    def buffers(self, input_bytes: int) -> int:
        return 1       # the step's inputs (hundreds of MB) exceed the L2 cache by far

    def prepare(self, label, call, n_buffers):
        sample = _or_exit(lambda: self.inner.prepare(label, call, n_buffers), f"{label}'s warm-up")

        def synced() -> float:
            barrier(self.device)
            return _or_exit(sample, f"a sample of {label}")
        return synced


def _or_exit(fn, what: str):
    """fn(), or on an exception its traceback and SystemExit (which timing.interleaved does not
    catch): this rank's process ends, and the launcher (mp.spawn, torchrun) stops the others,
    which would otherwise wait for its collectives. The ranks cannot agree on the failure
    first: the others are inside the step's collectives that this rank never reached."""
    try:
        return fn()
    except Exception as exc:
        traceback.print_exc()
        raise SystemExit(f"rank {dist.get_rank()}: {what} raised {type(exc).__name__}: {exc}; the run stops "
                         "(the other ranks wait in its collectives)") from exc


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def barrier(device):
    """Every rank's queued work done, then all ranks meet."""
    sync(device)
    dist.barrier(**({"device_ids": [device.index]} if device.type == "cuda" else {}))
    sync(device)


class Spans:
    """Start/end marks around calls (CUDA events on the current stream, or the host clock on the
    CPU), summed per label after a synchronization."""

    def __init__(self, device):
        self.device, self.marks = device, []

    def mark(self):
        if self.device.type == "cuda":
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            return event
        return time.perf_counter()

    def wrap(self, label_of, fn):
        def timed(*args, **kwargs):
            start = self.mark()
            out = fn(*args, **kwargs)
            self.marks.append((label_of(), start, self.mark()))
            return out
        return timed

    def totals_ms(self) -> dict[str, float]:
        sync(self.device)
        out: dict[str, float] = {}
        for label, start, end in self.marks:
            ms = start.elapsed_time(end) if self.device.type == "cuda" else (end - start) * 1e3
            out[label] = out.get(label, 0.0) + ms
        return out


def run(rank: int, world: int, args, init_method: str):
    backend = "gloo" if args.tiny else "nccl"
    if backend == "nccl":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
        device = torch.device("cuda", torch.cuda.current_device())
    else:
        torch.set_num_threads(1)
        device = torch.device("cpu")
    dist.init_process_group(backend, init_method=init_method, rank=rank, world_size=world)
    try:
        result = measure(rank, world, args, device)
    finally:
        dist.destroy_process_group()
    if rank == 0:
        report(result, args)


# Normwise bound of the equivalence check: two bf16 roundings of the same products (the module's
# tests find them bitwise equal; a routing or layout error is far outside it).
CHECK_TOL = 2 * torch.finfo(torch.bfloat16).eps


def check_equivalent(ep, full, x, ids, probs, n_experts, dy):
    """Raise where ``ep`` (this rank's tokens x, ids, probs) does not give what ``full`` gives
    on the same tokens, sorted by expert and put back: y, and the gradients of x and probs for
    the cotangent ``dy`` (the timed step's backward), each within CHECK_TOL normwise, computed
    in NaN-poisoned memory (an output left unwritten stays NaN and fails). The weights'
    gradients are the module's tests' (tests/test_expert_parallel.py): an expert's gathers the
    tokens of every rank."""
    x, probs = x.detach().requires_grad_(True), probs.detach().requires_grad_(True)
    with poisoned_allocations():
        y = ep(x, ids, probs)
        got = (y.detach(), *torch.autograd.grad(y, (x, probs), dy))
        order = torch.argsort(ids, stable=True)
        counts = torch.bincount(ids, minlength=n_experts)
        xs, ps = x.detach()[order].requires_grad_(True), probs.detach()[order].requires_grad_(True)
        ys = full(xs, counts, ps)
        sorted_want = (ys.detach(), *torch.autograd.grad(ys, (xs, ps), dy[order]))
        want = [torch.empty_like(t) for t in got]
        for w, sw in zip(want, sorted_want):
            w[order] = sw
    for name, a, b in zip(("y", "dx", "dprobs"), got, want):
        err = normwise_rel_error(a, b)
        if not err <= CHECK_TOL:   # NaN fails too
            raise RuntimeError(f"expert parallel's {name} differs from one module's on the same tokens by "
                               f"{err:.1e} normwise (bound {CHECK_TOL:.1e})")


def measure(rank, world, args, device):
    E, T, H, F = args.experts, args.tokens, args.hidden, args.ffn
    if T % world:
        raise SystemExit(f"--shape: TOKENS = {T} must be a multiple of the {world} ranks")
    dtype = torch.bfloat16
    torch.manual_seed(0)                                   # the same full module on every rank
    full = GroupedGLUMLP(E, H, F, recipe=args.recipe, device=device, dtype=dtype)
    ep = ExpertParallelGLUMLP.from_grouped(full)
    params = list(full.parameters())
    local_params = list(ep.parameters())

    g = torch.Generator(device=device).manual_seed(1 + rank)
    n = T // world
    x = torch.randn(n, H, device=device, dtype=dtype, generator=g).requires_grad_(True)
    ids = torch.randint(0, E, (n,), device=device, generator=g)
    probs = (torch.rand(n, device=device, generator=g) + 0.1).requires_grad_(True)
    dy = torch.randn(n, H, device=device, dtype=dtype, generator=g)
    # One GPU: all T tokens (this rank's and the other ranks' draws alike: any tokens will do).
    x_all = torch.randn(T, H, device=device, dtype=dtype, generator=g).requires_grad_(True)
    ids_all = torch.randint(0, E, (T,), device=device, generator=g)
    probs_all = (torch.rand(T, device=device, generator=g) + 0.1).requires_grad_(True)
    dy_all = torch.randn(T, H, device=device, dtype=dtype, generator=g)
    order_all = torch.argsort(ids_all, stable=True)
    counts_all = torch.zeros(E, dtype=torch.int64, device=device).scatter_add_(0, ids_all, torch.ones_like(ids_all))
    x_sorted = x_all.detach()[order_all].requires_grad_(True)
    probs_sorted = probs_all.detach()[order_all].requires_grad_(True)

    def ep_step():
        y = ep(x, ids, probs)
        return torch.autograd.grad(y, [x, probs, *local_params], dy)

    def one_gpu_step():
        order = torch.argsort(ids_all, stable=True)
        inverse = expert_parallel._inverse(order)
        counts = torch.zeros(E, dtype=torch.int64, device=device).scatter_add_(0, ids_all, torch.ones_like(ids_all))
        y_sorted = full(expert_parallel.Gather.apply(x_all, order, inverse), counts,
                        expert_parallel.Gather.apply(probs_all, order, inverse))
        y = expert_parallel.Gather.apply(y_sorted, inverse, order)
        return torch.autograd.grad(y, [x_all, probs_all, *params], dy_all)

    def op_only_step():
        y = full(x_sorted, counts_all, probs_sorted)
        return torch.autograd.grad(y, [x_sorted, probs_sorted, *params], dy_all)

    # Checked before anything is timed: this rank's y from the expert-parallel module against one
    # module holding every expert on the same tokens (the same weights: from_grouped); one rank's
    # mismatch ends the run (_or_exit: the launcher stops the others).
    _or_exit(lambda: check_equivalent(ep, full, x, ids, probs, E, dy), "the equivalence check")

    # The paths taken: the local call's key is this rank's received rows.
    with torch.no_grad():
        n_recv = sum(expert_parallel.plan_dispatch(ids, E, world, ep.process_group).recv_splits)
    paths = {}
    for label, rows, n_experts, weight in (("local", n_recv, ep.num_local_experts, ep.experts.fc2_weight),
                                           ("one GPU", T, E, full.fc2_weight)):
        problem = problem_for(torch.empty(rows, H, dtype=dtype, device="meta"), weight, "swiglu", 32, False,
                              args.recipe)
        found = op.route(problem, device)
        paths[label] = (FAMILY.key(problem), found if isinstance(found, str) or found is None else found.name)

    inner = (timing.WallTimer(warmup=1) if device.type == "cpu" else
             timing.CudaTimer(device, min_sample_s=0.0, graph_below_s=0.0, warmup=2, min_reps=args.steps,
                              max_reps=args.steps))
    timings = timing.interleaved({"expert parallel": ep_step, "one GPU": one_gpu_step,
                                  "one GPU, op only": op_only_step},
                                 rounds=args.rounds, timer=RankTimer(inner, device))
    failed = {k: repr(v) for k, v in timings.items() if isinstance(v, Exception)}
    if failed:
        raise RuntimeError(f"rank {rank}: providers failed: {failed}")

    # Instrumented steps: CUDA events around the module's collectives.
    spans = Spans(device)
    phase = ["forward"]
    real_a2a, real_plan = expert_parallel.all_to_all, expert_parallel.plan_dispatch
    expert_parallel.all_to_all = spans.wrap(lambda: f"all-to-all {phase[0]}", real_a2a)
    expert_parallel.plan_dispatch = spans.wrap(lambda: "dispatch plan (sort, count exchange, host copy)", real_plan)
    steps = Spans(device)
    try:
        for _ in range(2):                                     # warm-up
            ep_step()
        barrier(device)
        spans.marks.clear()
        for _ in range(args.steps):
            start = steps.mark()
            phase[0] = "forward (x, probs, y)"
            y = ep(x, ids, probs)
            phase[0] = "backward (dy, dprobs, dx)"
            torch.autograd.grad(y, [x, probs, *local_params], dy)
            steps.marks.append(("step", start, steps.mark()))
    finally:
        expert_parallel.all_to_all, expert_parallel.plan_dispatch = real_a2a, real_plan
    step_ms = steps.totals_ms()["step"] / args.steps
    parts = {k: v / args.steps for k, v in spans.totals_ms().items()}

    mine = {"rank": rank, "received_rows": n_recv, "paths": paths, "step_ms": step_ms, "parts_ms": parts,
            "timings": {k: {"median_ms": v.median_ms, "min_ms": v.min_ms, "max_ms": v.max_ms,
                            "samples_ms": list(v.samples_ms)} for k, v in timings.items()}}
    gathered = [None] * world
    dist.all_gather_object(gathered, mine)
    return {"world": world, "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
            "ranks": gathered}


def report(result, args):
    world, ranks = result["world"], result["ranks"]
    triton_version = getattr(sys.modules.get("triton"), "__version__", "?")
    print(f"torch {torch.__version__}, triton {triton_version}, tilefuse {tilefuse.__version__}, "
          f"{world} x {result['device']}, {'gloo (--tiny)' if args.tiny else 'NCCL'}, "
          f"NCCL_NVLS_ENABLE={os.environ.get('NCCL_NVLS_ENABLE')}")
    print(f"shape: E {args.experts}, T {args.tokens} ({args.tokens // world} per rank), H {args.hidden}, "
          f"F {args.ffn}, bf16, swiglu, glu_interleave 32, recipe {args.recipe}")
    for r in ranks:
        paths = "; ".join(f"{label} {key} -> {route}" for label, (key, route) in r["paths"].items())
        print(f"  rank {r['rank']}: received {r['received_rows']} rows; {paths}")
    # A provider's step is the slowest rank's (the collectives pace the ranks; for one GPU, every
    # rank ran it on its own GPU at the same time). Expert parallel: W GPUs share the T tokens
    # of a step; one GPU: it does all T.
    table = {}
    for name in ranks[0]["timings"]:
        t = {k: max(r["timings"][name][k] for r in ranks) for k in ("median_ms", "min_ms", "max_ms")}
        gpus = world if name == "expert parallel" else 1
        t["tokens_per_s"] = args.tokens / (t["median_ms"] * 1e-3)
        t["tokens_per_s_per_gpu"] = t["tokens_per_s"] / gpus
        t["ms_per_token_per_gpu"] = t["median_ms"] * gpus / args.tokens
        table[name] = t
    # The verdict within rounds (benchmarks/README.md): each round's step is the slowest rank's,
    # and the ratio is that round's; its median over the rounds
    def per_round(name):
        return [max(r["timings"][name]["samples_ms"][i] for r in ranks)
                for i in range(len(ranks[0]["timings"][name]["samples_ms"]))]
    one = per_round("one GPU")
    for name, t in table.items():
        gpus = world if name == "expert parallel" else 1
        t["vs_one_gpu"] = statistics.median(s * gpus / o for s, o in zip(per_round(name), one))
    print()
    print("| provider | ms / step [min - max] | tokens/s, all its GPUs | tokens/s per GPU | "
          "time per token per GPU vs one GPU |")
    print("|---|---|---|---|---|")
    for name, t in table.items():
        print(f"| {name} | {t['median_ms']:.3f} [{t['min_ms']:.3f} - {t['max_ms']:.3f}] | {t['tokens_per_s']:,.0f} | "
              f"{t['tokens_per_s_per_gpu']:,.0f} | {t['vs_one_gpu']:.3f}x |")
    print(f"\nexpert parallel: {table['expert parallel']['vs_one_gpu']:.3f}x one GPU's time per token per GPU "
          "(issue 20's target: <= 1.3x)")
    print("\ninstrumented steps (events around the module's collectives; ms per step):")
    for r in ranks:
        comm = sum(v for k, v in r["parts_ms"].items() if k.startswith("all-to-all"))
        plan = sum(v for k, v in r["parts_ms"].items() if k.startswith("dispatch plan"))
        parts = ", ".join(f"{k} {v:.3f}" for k, v in r["parts_ms"].items())
        print(f"  rank {r['rank']}: step {r['step_ms']:.3f}; {parts}; all-to-alls {comm:.3f} "
              f"({comm / r['step_ms']:.1%} of the step), with the dispatch plan {comm + plan:.3f} "
              f"({(comm + plan) / r['step_ms']:.1%})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "table": table, **result}, f, indent=1)


def main(argv=None):
    args = parse_args(argv)
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:          # torchrun
        run(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), args, "env://")
        return
    if not args.tiny and torch.cuda.device_count() < args.ranks:
        raise SystemExit(f"needs {args.ranks} CUDA GPUs, found {torch.cuda.device_count()} (--tiny: a CPU smoke run)")
    with tempfile.TemporaryDirectory() as tmp:
        mp.spawn(run, args=(args.ranks, args, f"file://{tmp}/init"), nprocs=args.ranks)


if __name__ == "__main__":
    main()
