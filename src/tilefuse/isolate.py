"""Run `tilefuse check`'s parts (and `tilefuse tune`'s keys) in a child process: a crash is a
failed part, not the end.

A kernel that writes out of bounds can end the process that launched it: on the CPU, Triton's
interpreter stores through raw addresses and may segfault; on a GPU an illegal memory access
leaves the CUDA context unusable, so every later launch in that process fails too. Either way
an in-process check would stop (no report) or blame every later part. ``run_parts`` runs a
list of ``module:function(**kwargs)`` calls one after another in a child Python
(``python -c``, this module's ``_child``) with the parent's import path and environment
(``TRITON_INTERPRET`` included) and its output on the parent's terminal. Each part's return
value comes back through JSON as it finishes. A child that dies inside a part (a signal, an
exit) leaves that part's Outcome saying how, with the innermost Python frames ``faulthandler``
wrote, and a fresh child runs the parts after it; so does a part after which a CUDA launch
fails (the context lost), and a part still running after ``timeout`` seconds (a hung kernel:
faulthandler dumps where it waited and ends the child). One child runs every part when nothing
goes wrong.
"""

from __future__ import annotations

import faulthandler
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Outcome:
    """What a child returned (``value``, after a JSON round trip; ``ok``), or why it did not."""
    ok: bool
    value: object = None
    ptxas: str | None = None     # the ptxas Triton would use when the child finished (device.ptxas)
    ended: str = ""              # how its process ended when not cleanly ("was killed by signal SIGSEGV
                                 # (...)", "raised RuntimeError: ...")
    frames: tuple[str, ...] = ()  # innermost first, from faulthandler's dump
    lost_context: bool = False   # a CUDA launch failed after the part: the next parts ran in a new child

    @property
    def failed(self) -> bool:
        """Whether the part failed as a process, whatever its rows say."""
        return not self.ok or bool(self.ended) or self.lost_context

    def why(self) -> str:
        """One line for a report: how the child ended and where."""
        said = []
        if self.ended:
            said.append(f"its process {self.ended}" + (" after writing its result" if self.ok else ""))
        elif not self.ok:
            said.append("its process wrote no result")
        if self.lost_context:
            said.append("a CUDA launch failed after it (the CUDA context was lost); the parts after it ran "
                        "in a new process")
        text = "; ".join(said)
        if self.frames:
            text += "; innermost frames: " + " <- ".join(self.frames)
        return text


def _ended(returncode: int) -> str:
    if returncode < 0:
        try:
            sig = signal.Signals(-returncode)
            return f"was killed by signal {sig.name} ({signal.strsignal(sig) or sig.name})"
        except ValueError:
            return f"was killed by signal {-returncode}"
    return f"exited with status {returncode}"


def _frames(dump: str, keep: int = 4) -> tuple[str, ...]:
    """The innermost ``keep`` frames of the part in a faulthandler dump, as "dir/file.py:LINE
    in function": of the thread running this module's child loop (a timeout's dump lists every
    thread, the main one not necessarily first), the frames above the loop's own, most recent
    call first as faulthandler lists them."""
    blocks, block = [], None
    for line in dump.splitlines():
        if line.endswith("(most recent call first):"):   # "Stack (...)", "Thread 0x... (...)"
            blocks.append(block := [])
        elif block is not None and line.strip().startswith('File "'):
            path, _, rest = line.strip()[len('File "'):].partition('", line ')
            block.append((path, rest))
    main = next((b for b in blocks if any(path == __file__ for path, _ in b)), blocks[0] if blocks else [])
    out = []
    for path, rest in main:
        if path == __file__ or path.startswith("<frozen"):
            break   # the child's own frames: nothing inside them is the part's
        out.append(f"{'/'.join(Path(path).parts[-2:])}:{rest}")
    return tuple(out[:keep])


# The child's command: this module's loop, with the working directory taken off the import
# path (``python -c`` puts it first, ahead of PYTHONPATH: a stray tilefuse/ or json.py there
# would be imported instead of the parent's).
_BOOT = ("import sys; del sys.path[0]; from pathlib import Path; "
         f"from {__name__} import _child; _child(Path(sys.argv[1]), int(sys.argv[2]))")


def call(target: str, kwargs: dict, timeout: float | None = None) -> Outcome:
    """One part, ``target`` ("package.module:function") with ``kwargs``, in a child."""
    return run_parts([(target, kwargs)], timeout)[0]


def run_parts(parts: list[tuple[str, dict]], timeout: float | None = None) -> list[Outcome]:
    """Each part's Outcome, in order (module docstring): the parts run in one child Python,
    and in a fresh one after a part that killed its process, lost the CUDA context or ran
    past ``timeout`` seconds. The child logs each part's start, its result, and a lost
    context after it, so an end at any point is laid on the part it happened in."""
    outcomes: list[Outcome | None] = [None] * len(parts)
    first = 0
    while first < len(parts):
        log, returncode, frames, timed_out = _run_child(parts, first, timeout)
        for index, doc in log["done"].items():
            if "raised" in doc:
                outcomes[index] = Outcome(ok=False, ended=f"raised {doc['raised']}")
            else:
                outcomes[index] = Outcome(ok=True, value=doc["value"], ptxas=doc.get("ptxas"))
        if log["lost"] is not None:          # the child stopped itself after that part
            outcomes[log["lost"]].lost_context = True
            first = log["lost"] + 1
            continue
        if returncode == 0 and len(parts) - 1 in log["done"]:
            break
        # the child ended early: inside the part it started last, or after that part's result
        # (in the CUDA check after it, or at exit); before any part: its start failed
        running = max(log["started"], default=first)
        ended = (f"was still running after {timeout:g} s and was stopped (a hang?)" if timed_out
                 else _ended(returncode) if returncode else "exited without writing its result")
        if outcomes[running] is None:
            outcomes[running] = Outcome(ok=False, ended=ended, frames=frames)
        else:
            outcomes[running].ended, outcomes[running].frames = ended, frames
        first = running + 1
    return outcomes


def _run_child(parts, first: int, timeout: float | None) -> tuple[dict, int, tuple[str, ...], bool]:
    """Run parts[first:] in one child: (its log: {"started": [indices], "done": {index: result
    document}, "lost": index or None}, exit status, the frames of its crash, whether it was
    stopped by the timeout)."""
    with tempfile.TemporaryDirectory(prefix="tilefuse-check-") as tmp:
        work = Path(tmp)
        request = [{"index": i, "target": t, "kwargs": kw} for i, (t, kw) in enumerate(parts) if i >= first]
        (work / "request.json").write_text(json.dumps({"parts": request, "timeout": timeout,
                                                       "warnings": _warning_filters()}))
        env = dict(os.environ)
        # the parent's import path, so the child imports what the parent imports (this
        # tilefuse, the caller's modules), not another installed copy
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        sys.stdout.flush()
        sys.stderr.flush()
        proc = subprocess.Popen([sys.executable, "-c", _BOOT, str(work), str(os.getpid())], env=env)
        try:
            returncode = proc.wait()
        except BaseException:
            # this process is leaving (KeyboardInterrupt, a SystemExit from a signal handler):
            # the child goes too, rather than running on, unread, holding the GPU
            _stop(proc)
            raise
        dump = work / "fault.txt"
        text = dump.read_text(errors="replace") if dump.exists() else ""
        return _read_log(work / "log.jsonl"), returncode, _frames(text), text.startswith("Timeout (")


def _stop(proc: subprocess.Popen, grace: float = 10.0) -> None:
    """SIGTERM, then SIGKILL after ``grace`` seconds, and reap it."""
    proc.terminate()
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _warning_filters() -> list:
    """This process's warning filters as JSON can carry them, for the child to install: its
    parts then warn as they would here (the CLI hides numpy's warnings from Triton's
    interpreter, for one). A filter on a warning class the child cannot import by name is
    left out."""
    out = []
    for action, message, category, module, lineno in warnings.filters:
        out.append([action, _pattern(message), f"{category.__module__}:{category.__qualname__}", _pattern(module),
                    lineno])
    return out


def _pattern(regex) -> str:
    """A filter's message or module as a pattern ``filterwarnings`` takes: compiled, its own;
    a plain string (the interpreter's default filters: matched exactly), escaped and
    anchored; None (any), empty."""
    if regex is None:
        return ""
    return regex.pattern if hasattr(regex, "pattern") else re.escape(regex) + r"\Z"


def _install_warning_filters(filters: list) -> None:
    import importlib
    warnings.resetwarnings()
    for action, message, category, module, lineno in filters:
        owner, _, name = category.partition(":")
        try:
            cls = importlib.import_module(owner)
            for attr in name.split("."):
                cls = getattr(cls, attr)
        except (ImportError, AttributeError):
            continue
        warnings.filterwarnings(action, message, cls, module, lineno, append=True)


def _die_with_parent(parent: int) -> None:
    """On Linux, have the kernel send this child SIGTERM when the thread that started it
    ends: a parent killed outright (SIGKILL, or a SIGTERM it has no handler for) runs no
    cleanup, and its child would otherwise run on, unread, holding the GPU. A parent already
    gone by now: exit at once."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)   # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:
        os._exit(1)


def _read_log(path: Path) -> dict:
    log = {"started": [], "done": {}, "lost": None}
    lines = path.read_text().splitlines() if path.exists() else []
    for line in lines:
        try:
            doc = json.loads(line)
        except json.JSONDecodeError:   # a line cut short by a crash mid-write: not written
            continue
        if "start" in doc:
            log["started"].append(doc["start"])
        elif "lost_context" in doc:
            log["lost"] = doc["lost_context"]
        else:
            log["done"][doc.pop("index")] = doc
    return log


def _context_lost() -> bool:
    """Whether CUDA was used in this process and a launch now fails (a sticky error)."""
    import torch
    if not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return False
    try:
        torch.cuda.synchronize()
        return torch.ones(1, device="cuda").add_(1).item() != 2.0
    except Exception:   # noqa: BLE001  any error here means the context is gone
        return True


def _child(work: Path, parent: int) -> None:
    import importlib
    _die_with_parent(parent)
    from .device import ptxas
    with open(work / "fault.txt", "w") as fault, open(work / "log.jsonl", "a") as log:
        def write(doc: dict) -> None:
            log.write(json.dumps(doc, default=str) + "\n")
            log.flush()
        faulthandler.enable(file=fault, all_threads=False)
        request = json.loads((work / "request.json").read_text())
        _install_warning_filters(request["warnings"])
        for part in request["parts"]:
            index = part["index"]
            write({"start": index})
            module, _, name = part["target"].partition(":")
            if request["timeout"]:   # armed through the part and the CUDA check after it
                faulthandler.dump_traceback_later(request["timeout"], exit=True, file=fault)
            try:
                value = getattr(importlib.import_module(module), name)(**part["kwargs"])
                doc = {"index": index, "value": value, "ptxas": ptxas()}
                json.dumps(doc, default=str)   # a value JSON cannot take raises here, as the part's
            except Exception as exc:   # noqa: BLE001  reported to the parent as the part's failure
                first = str(exc).splitlines()[0][:300] if str(exc) else ""
                doc = {"index": index, "raised": f"{type(exc).__name__}: {first}"}
            write(doc)
            lost = _context_lost()
            faulthandler.cancel_dump_traceback_later()
            if lost:
                write({"lost_context": index})
                os._exit(0)
        faulthandler.disable()
