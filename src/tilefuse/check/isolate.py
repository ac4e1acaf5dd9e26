"""Run one part of `tilefuse check` in a child process, so a crash is a failed row, not the end.

A kernel that writes out of bounds can end the process that launched it: on the CPU, Triton's
interpreter stores through raw addresses and may segfault; on a GPU an illegal memory access
leaves the CUDA context unusable, so every later launch in that process fails too. Either way
an in-process check would stop (no report) or blame every later section. ``call`` runs
``module:function(**kwargs)`` in a fresh interpreter (``python -m tilefuse.check.isolate``),
with the parent's import path and environment (``TRITON_INTERPRET`` included) and its output
on the parent's terminal, and returns what the function returned, through JSON, or how the
child died: its exit status or signal and the innermost Python frames ``faulthandler`` wrote.
"""

from __future__ import annotations

import faulthandler
import json
import os
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Outcome:
    """What a child returned (``value``, after a JSON round trip; ``ok``), or why it did not."""
    ok: bool
    value: object = None
    ptxas: str | None = None     # the ptxas Triton would use when the child finished (env.ptxas)
    ended: str = ""              # how the process ended when not cleanly: "signal SIGSEGV (...)"
    frames: tuple[str, ...] = ()  # innermost first, from faulthandler's dump

    def why(self) -> str:
        """One line for a report: how the child ended and where."""
        text = f"its process {self.ended}" if self.ended else "its process wrote no result"
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
    """The innermost ``keep`` frames of the crashing thread in a faulthandler dump, as
    "file.py:LINE in function" (faulthandler lists the most recent call first)."""
    out, inside = [], False
    for line in dump.splitlines():
        if line.endswith("(most recent call first):"):   # "Stack (...)", "Current thread 0x... (...)"
            if out:
                break
            inside = True
            continue
        text = line.strip()
        if inside and text.startswith('File "'):
            path, _, rest = text[len('File "'):].partition('", line ')
            if path == __file__ or path.startswith("<frozen"):
                break   # the child's own frames: nothing inside them is the part's
            out.append(f"{'/'.join(Path(path).parts[-2:])}:{rest}")
            if len(out) == keep:
                break
    return tuple(out)


def call(target: str, kwargs: dict) -> Outcome:
    """Run ``target`` ("package.module:function") with ``kwargs`` (JSON-able) in a child
    Python and return its Outcome. The child's stdout and stderr are the parent's."""
    with tempfile.TemporaryDirectory(prefix="tilefuse-check-") as tmp:
        work = Path(tmp)
        (work / "request.json").write_text(json.dumps({"target": target, "kwargs": kwargs}))
        env = dict(os.environ)
        # the parent's import path, so the child imports this tilefuse (and whatever the
        # parent could import), not another installed copy
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        sys.stdout.flush()
        sys.stderr.flush()
        proc = subprocess.run([sys.executable, "-m", __name__, str(work)], env=env, check=False)
        result, dump = work / "result.json", work / "fault.txt"
        frames = _frames(dump.read_text(errors="replace")) if dump.exists() else ()
        ended = "" if proc.returncode == 0 else _ended(proc.returncode)
        if not result.exists():
            return Outcome(ok=False, ended=ended or "exited without writing its result", frames=frames)
        doc = json.loads(result.read_text())
        if "raised" in doc:
            return Outcome(ok=False, ended=f"raised {doc['raised']}", frames=frames)
        return Outcome(ok=True, value=doc["value"], ptxas=doc.get("ptxas"), ended=ended, frames=frames)


def _child(work: Path) -> None:
    import importlib
    with open(work / "fault.txt", "w") as fault:
        faulthandler.enable(file=fault, all_threads=False)
        request = json.loads((work / "request.json").read_text())
        module, _, name = request["target"].partition(":")
        try:
            value = getattr(importlib.import_module(module), name)(**request["kwargs"])
            from .env import ptxas
            text = json.dumps({"value": value, "ptxas": ptxas()}, default=str)
        except Exception as exc:   # noqa: BLE001  reported to the parent as the part's failure
            first = str(exc).splitlines()[0][:300] if str(exc) else ""
            text = json.dumps({"raised": f"{type(exc).__name__}: {first}"})
        # written to a side file, then renamed: a result is there whole or not at all
        (work / "result.part").write_text(text)
        (work / "result.part").replace(work / "result.json")
        faulthandler.disable()


if __name__ == "__main__":
    _child(Path(sys.argv[1]))
