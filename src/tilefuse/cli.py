"""Command line: ``tilefuse check | tune | bench | info``."""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import sys
import tempfile
from pathlib import Path

# The description `tilefuse --help` prints (plain text, unlike the docstring).
DESCRIPTION = ("tilefuse: fused Triton GPU kernels for PyTorch. Commands: check (verify and benchmark, "
               "write a report), tune (sweep tuning keys), bench (benchmarks only, GPU), "
               "info (print the environment).")


def _use_interpreter_without_cuda(argv) -> None:
    """Without CUDA, run the kernels in Triton's interpreter. TRITON_INTERPRET must be set
    before triton.language is imported (importing tilefuse imports torch._dynamo, which imports
    it), so when it is too late for this process the command re-runs itself with it set."""
    import warnings

    import torch
    if torch.cuda.is_available():
        return
    # numpy's warnings inside the interpreter (inf * 0 in masked-out lanes, the divisions by
    # zero whose inf a kernel clamps or discards) are not the user's business. Set in every
    # interpreted process, the re-executed one included.
    warnings.filterwarnings("ignore", category=RuntimeWarning, module="triton.runtime.interpreter")
    from .policy import interpreter_enabled
    if interpreter_enabled():   # any value Triton reads as true ("1", "on", "yes", ...)
        return
    os.environ["TRITON_INTERPRET"] = "1"
    if "triton.language" in sys.modules:
        os.execv(sys.executable, [sys.executable, "-m", "tilefuse.cli", *argv])


def _ops(args, command: str) -> tuple[str, ...] | None:
    """The ``--ops`` selection, or None after printing why it is invalid."""
    from .check import parse_ops
    try:
        return parse_ops(args.ops)
    except ValueError as exc:
        args.parser.print_usage(sys.stderr)
        print(f"tilefuse {command}: error: {exc}", file=sys.stderr)
        return None


def _show_progress(args) -> bool:
    """Progress bars unless --no-progress, and only on a terminal (not in logs or pipes)."""
    return not args.no_progress and sys.stderr.isatty()


def _refusal(args) -> str | None:
    """Why `tilefuse check` or `bench` cannot run here, or None. main asks before --out is
    touched: a refusal (exit 2) creates nothing."""
    from . import policy
    from .check import triton_missing
    if (why := triton_missing(args.command)) is not None:   # both commands run the kernels
        return f"tilefuse {args.command}: {why}"
    if policy.get_level() == 0:
        # check: every kernel row would fail as "did not launch", the cause unsaid; bench: the
        # rows labelled tilefuse would time plain PyTorch
        work = "check verifies" if args.command == "check" else "bench times"
        return (f"tilefuse {args.command}: the level in force is 0 (TILEFUSE_LEVEL=0), which turns off the kernels "
                f"the {work}; unset it or set 1-3")
    if args.command == "bench":
        import torch
        if not torch.cuda.is_available():
            return "tilefuse bench: no CUDA device; nothing timed"
    return None


def _check(args) -> int:
    from .check import run_check, summary
    result = run_check(args.out, quick=args.quick, bench=not args.no_bench, show_progress=_show_progress(args),
                       ops=args.ops, isolate=not args.in_process, part_timeout=args.part_timeout)
    print(summary(result, args.out))
    return 0 if all(r["ok"] for r in result["verification"]) else 1


def _info(args) -> int:
    from .check.env import environment
    print(json.dumps(environment(), indent=2))
    return 0


def _bench(args) -> int:
    from .check import run_check
    result = run_check(args.out, quick=args.quick, verify=False, show_progress=_show_progress(args), ops=args.ops,
                       isolate=not args.in_process, part_timeout=args.part_timeout)
    print(open(os.path.join(args.out, "report.md")).read())
    # a benchmark that raised is a failed row of the report: the exit status says so
    return 0 if all(row["ok"] for row in result["verification"]) else 1


def _in_process_help(parts: str) -> str:
    return (f"run the parts ({parts}) in this process. Default: in a child process, replaced after a part "
            f"that crashes it or loses its CUDA context; that part is a failed row and the rest still run")


def _part_timeout_help(part: str) -> str:
    return (f"stop a part ({part}) still running after SECONDS, a failed row saying where it waited, and go on "
            f"(default {PART_TIMEOUT:g}; 0: never; needs the child process, not --in-process)")


PART_TIMEOUT = 1800.0


def _parser() -> argparse.ArgumentParser:
    from . import __version__
    from .check.sections import OPS
    parser = argparse.ArgumentParser(prog="tilefuse", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"tilefuse {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("check", help="verify each op's paths on this machine against float64, benchmark on a GPU, "
                                     "write a report")
    p.add_argument("--out", default="tilefuse-report", help="report folder (default tilefuse-report/)")
    p.add_argument("--quick", action="store_true", help="fewer shapes and smaller benchmarks")
    p.add_argument("--no-bench", action="store_true", help="verification only")
    p.add_argument("--no-progress", action="store_true", help="no progress bars (off anyway when not on a terminal)")
    p.add_argument("--ops", help=f"comma-separated ops to check (default: all): {', '.join(OPS)}")
    p.add_argument("--in-process", action="store_true",
                   help=_in_process_help("each op's verification and benchmark"))
    p.add_argument("--part-timeout", type=float, metavar="SECONDS",
                   help=_part_timeout_help("one op's verification or benchmark"))
    p.set_defaults(func=_check, parser=p)
    sub.add_parser("tune", help="sweep tuning keys ahead of time (see `tilefuse tune --help`)")
    p = sub.add_parser("bench", help="benchmarks only (GPU): report.md/json in --out, no verification")
    p.add_argument("--out", default="tilefuse-report", help="report folder (default tilefuse-report/)")
    p.add_argument("--quick", action="store_true", help="fewer shapes and smaller benchmarks")
    p.add_argument("--no-progress", action="store_true", help="no progress bars (off anyway when not on a terminal)")
    p.add_argument("--ops", help=f"comma-separated ops to benchmark (default: all): {', '.join(OPS)}")
    p.add_argument("--in-process", action="store_true", help=_in_process_help("each op's benchmark"))
    p.add_argument("--part-timeout", type=float, metavar="SECONDS", help=_part_timeout_help("one op's benchmark"))
    p.set_defaults(func=_bench, parser=p)
    p = sub.add_parser("info", help="print the environment")
    p.set_defaults(func=_info)
    return parser


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    from . import policy
    try:
        policy.get_level()          # a bad TILEFUSE_LEVEL: one line, not a traceback later
    except ValueError as exc:
        print(f"tilefuse: {exc}", file=sys.stderr)
        return 2
    if argv[:1] in (["check"], ["tune"], ["bench"]):
        _use_interpreter_without_cuda(argv)
    if argv[:1] == ["tune"]:
        # `tilefuse tune ...` is the tuning command's own parser (tilefuse.tuning.command).
        from .tuning.command import main as tune_main
        return tune_main(argv[1:])
    args = _parser().parse_args(argv)
    # usage errors after parsing print the subcommand's usage line, as argparse's own do
    parser = getattr(args, "parser", None)
    if hasattr(args, "ops"):    # check and bench: the selection as a tuple of op names
        args.ops = _ops(args, args.command)
        if args.ops is None:
            return 2        # before --out is touched: a usage error creates nothing
        if (why := _refusal(args)) is not None:
            print(why, file=sys.stderr)
            return 2
    if hasattr(args, "part_timeout"):
        args.part_timeout = _part_timeout(parser, args)
    if getattr(args, "out", None) is not None:
        _check_out(parser, args.out)
    if not getattr(args, "in_process", True):
        with _exit_on_sigterm():
            return args.func(args)
    return args.func(args)


@contextlib.contextmanager
def _exit_on_sigterm():
    """check / bench with their child process: a SIGTERM (a job scheduler's, ``kill``) ends
    this process by SystemExit(143), so the child is stopped and its work folder removed on
    the way out (isolate._run_child) rather than left behind. Only while the parent waits on
    its child, in waitpid, which a signal interrupts; in-process, a handler would wait for the
    running kernel. (`tilefuse tune` waits in worker threads, which a handler cannot stop: its
    children end with it through isolate._die_with_parent.) Only from the main thread, where
    Python takes signal handlers; the caller's handler comes back afterwards (main may be
    embedded)."""
    import signal
    import threading
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _part_timeout(parser, args) -> float | None:
    """--part-timeout in seconds for check.run_check (None: none), or a usage error."""
    value = args.part_timeout
    if value is None:
        return None if args.in_process else PART_TIMEOUT
    if args.in_process:
        parser.error("--part-timeout stops a part's child process; --in-process runs none")
    if not math.isfinite(value) or not 0 <= value <= 1e8:   # faulthandler's timer overflows near 9.2e9 s
        parser.error(f"--part-timeout takes 0 (no limit) to 1e8 seconds; got {value:g}")
    return value or None


def _check_out(parser, out: str) -> None:
    """--out: a folder the report can be written into, made if missing; a usage error (exit 2)
    before any work otherwise, not a traceback after the whole run with exit 1 (a failed
    check's status). The reports already there are replaced, so they must be files."""
    if not out:
        parser.error("--out must name a folder (an empty path would write the report into the current folder)")
    folder = Path(out)
    if folder.exists() and not folder.is_dir():
        parser.error(f"--out {out}: exists and is not a folder (the report is written into a folder)")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        parser.error(f"--out {out}: cannot write the report there ({exc.strerror or exc})")
    for name in ("report.json", "report.md"):
        if (folder / name).exists() and not (folder / name).is_file():
            parser.error(f"--out {out}: {name} there is not a file (the report replaces it)")

if __name__ == "__main__":
    sys.exit(main())
