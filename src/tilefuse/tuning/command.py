"""``tilefuse tune``: sweep keys ahead of time, show the table, export a built-in table.

    tilefuse tune --op dyt --shape 65536x1024 [--dtype bf16] [--pass fwd|bwd]
    tilefuse tune --op so2_mixing_stack --shape 3x32 --pass level3
    tilefuse tune --all-defaults [--op dyt] [--devices 0,1,2,3]
    tilefuse tune --show
    tilefuse tune --export-builtin DIR

Sweeps need a CUDA device (without one the command refuses at once, exit status 2; ``--show``
and ``--export-builtin`` work anywhere). Keys already covered (swept, or in a built-in table)
in the table of the devices swept on are skipped unless ``--force``. Sweeps print progress
bars on stderr (on a terminal) and a result table on stdout; the exit status is 1 if any key
aborted (its message names the candidate), 0 otherwise.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from . import table
from .family import family_names, get_family
from .runner import format_results, format_table, sweep_parallel
from .sweep import ROUNDS, covered_keys


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="tilefuse tune",
        description="Sweep tilefuse kernel configs per shape key on this GPU and record the "
                    "winners (or that the baseline won) in the tuning table.")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--shape", action="append", metavar="SHAPE",
                      help="a problem shape for --op (dyt: ROWSxCOLS of a channels-last x); repeatable")
    what.add_argument("--all-defaults", action="store_true",
                      help="the standard shape grid of every op (or of --op)")
    what.add_argument("--show", action="store_true", help="print the table this machine uses")
    what.add_argument("--export-builtin", metavar="DIR",
                      help="write this GPU's built-in table into DIR: the shipped entries with this machine's "
                           "measured ones on top")
    p.add_argument("--op", choices=family_names(), help="op family (required with --shape)")
    p.add_argument("--dtype", help="x dtype for --shape: fp32, bf16 or fp16 (default fp32; grouped_glu_mlp: bf16, "
                                   "or a recipe, fp8_block / mxfp8 / nvfp4, on bf16 inputs)")
    p.add_argument("--pass", dest="pass_", choices=("fwd", "bwd", "level3"),
                   help="only this pass for --shape (default: both); level3: so2_mixing_stack's fp32 level-3 "
                        "key (forward + backward, reduced-precision variants validated against float64)")
    p.add_argument("--force", action="store_true", help="sweep keys that are already covered")
    p.add_argument("--devices", metavar="I,J,...",
                   help="CUDA device indices to sweep on, one process each (default: the current device)")
    p.add_argument("--rounds", type=int, default=ROUNDS, help=f"timing rounds (default {ROUNDS})")
    p.add_argument("--in-process", action="store_true",
                   help="sweep in this process (with --devices, one spawned process a GPU). Default: each GPU's "
                        "keys in a child process; a key that crashes it or loses its CUDA context aborts alone, "
                        "and a fresh child sweeps the keys after it")
    p.add_argument("--dry-run", action="store_true", help="sweep and print, record nothing")
    p.add_argument("--no-progress", action="store_true",
                   help="no progress bars (off anyway when stderr is not a terminal)")
    return p


def _items(args, parser) -> list[tuple[str, object]]:
    """(family, problem) pairs to sweep, one per key, in a stable order."""
    if args.shape:
        if args.op is None:
            parser.error("--shape needs --op")
        family = get_family(args.op)
        try:
            problems = [p for shape in args.shape
                        for p in family.problems_from_cli(shape, args.dtype, args.pass_)]
        except ValueError as exc:
            parser.error(str(exc))
        pairs = [(args.op, p) for p in problems]
    else:
        if args.dtype or args.pass_:
            parser.error("--dtype and --pass apply to --shape only")
        names = [args.op] if args.op else family_names()
        pairs = [(name, p) for name in names for p in get_family(name).default_problems()]
    unique = {}
    for name, problem in pairs:
        unique.setdefault((name, get_family(name).key(problem)), (name, problem))
    return list(unique.values())


def _devices(args, parser) -> list[str]:
    """``--devices`` as device names ([] without it: the current device)."""
    if not args.devices:
        return []
    try:
        indices = [int(i) for i in args.devices.split(",")]
    except ValueError:
        parser.error(f"--devices is a comma-separated list of device indices, got {args.devices!r}")
    if any(i < 0 for i in indices) or len(set(indices)) != len(indices):
        parser.error(f"--devices takes distinct non-negative device indices (two workers on one GPU would "
                     f"time each other's kernels), got {args.devices!r}")
    return [f"cuda:{i}" for i in indices]


def _gpu_missing(devices: list[str]) -> str | None:
    """Why this machine cannot sweep ``devices`` (one line), or None. A sweep times kernels
    on a CUDA device; without one it could only fail key by key."""
    if not torch.cuda.is_available():
        return ("no CUDA device; nothing swept (tuning times kernels on a GPU; "
                "--show and --export-builtin work without one)")
    count = torch.cuda.device_count()
    bad = [d for d in devices if not 0 <= torch.device(d).index < count]
    if bad:
        return f"--devices {', '.join(bad)}: this machine has {count} CUDA device(s), indices 0..{count - 1}"
    return None


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.show or args.export_builtin is not None:
        given = [flag for flag, value in (("--op", args.op), ("--dtype", args.dtype), ("--pass", args.pass_),
                                          ("--force", args.force), ("--devices", args.devices),
                                          ("--dry-run", args.dry_run), ("--rounds", args.rounds != ROUNDS),
                                          ("--in-process", args.in_process))
                 if value]
        if given:
            parser.error(f"{' '.join(given)} do(es) not apply to "
                         f"{'--show' if args.show else '--export-builtin'} (it sweeps nothing)")
    if args.show:
        print(format_table())
        return 0
    if args.export_builtin is not None:
        if not args.export_builtin.strip():
            parser.error("--export-builtin needs a folder (got an empty one)")
        if Path(args.export_builtin).exists() and not Path(args.export_builtin).is_dir():
            parser.error(f"--export-builtin {args.export_builtin}: exists and is not a folder (the table is "
                         f"written into one, made if missing)")
        try:
            print(f"wrote {table.export_builtin(args.export_builtin)}")
        except OSError as exc:
            parser.error(f"--export-builtin {args.export_builtin}: cannot write the table ({exc.strerror or exc})")
        return 0
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")

    items = _items(args, parser)
    devices = _devices(args, parser)
    missing = _gpu_missing(devices)
    if missing:
        print(f"tilefuse tune: {missing}", file=sys.stderr)
        return 2
    # Covered in the tables the sweeps record into: every listed device's (they share one
    # where their GPUs share a model), or the current device's.
    covered = set.intersection(*(covered_keys(device) for device in devices or [None]))
    todo = [(name, p) for name, p in items
            if args.force or (name, get_family(name).key(p)) not in covered]
    if len(todo) < len(items):
        print(f"{len(items) - len(todo)} of {len(items)} keys already covered (--force sweeps them again)")
    results, errors = sweep_parallel(todo, devices, isolate=not args.in_process, rounds=args.rounds,
                                     record=not args.dry_run, progress=not args.no_progress and sys.stderr.isatty())
    if results or errors:
        print(format_results(results, errors))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
