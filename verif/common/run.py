"""What the one-run commands of the benches share (``make sim``, ``make sim-link``): run one
bench on a build with its seed, keep its waveform and a GTKWave save file under
``build/waves/``, report the outcome, and open the newest waveform (``make waves``,
``make waves-link``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from .runner import BUILD, SimBuild, run

__all__ = ["WAVES", "trace_name", "write_save", "open_waves", "run_and_report"]

#: Where each run's waveform and save file are kept.
WAVES = BUILD / "waves"


def trace_name(prefix: str, path: str, width: int) -> str:
    """A GTKWave trace name: ``prefix`` (the scope, ending in ``.``), the signal, its range."""
    return f"{prefix}{path}" + (f"[{width - 1}:0]" if width > 1 else "")


def write_save(save: Path, dump: Path, comment: str, top: str, groups: dict) -> Path:
    """A GTKWave save file for ``dump``: ``top``'s clock and reset, then each group of
    ``groups`` (name -> list of ``(path below top, width, datafmt)``) as a collapsible group."""
    from vcd.gtkw import GTKWSave

    prefix = f"{top}."  # Icarus' FST and Verilator's VCD both scope the design by its top
    save.parent.mkdir(parents=True, exist_ok=True)
    with open(save, "w") as f:
        gtkw = GTKWSave(f)
        gtkw.comment(comment)
        gtkw.dumpfile(str(dump))
        gtkw.zoom_markers(-20.0)
        gtkw.trace(trace_name(prefix, "clk", 1))
        gtkw.trace(trace_name(prefix, "rst", 1))
        for name, signals in groups.items():
            with gtkw.group(name):
                for path, width, datafmt in signals:
                    gtkw.trace(trace_name(prefix, path, width), datafmt=datafmt)
    return save


def open_waves(pattern: str, make_target: str) -> int:
    """Open the newest save file in ``build/waves/`` matching ``pattern`` in GTKWave (or say
    what to run where there is no GTKWave or no display)."""
    saves = sorted(WAVES.glob(pattern), key=lambda f: f.stat().st_mtime)
    if not saves:
        print(f"no waveform yet: run `make {make_target} WAVES=1` first", file=sys.stderr)
        return 2
    cmd = ["gtkwave", str(saves[-1])]
    if shutil.which("gtkwave") is None or not os.environ.get("DISPLAY"):
        print(f"no gtkwave or no display here; on a desktop run: {' '.join(cmd)}")
        return 0
    return subprocess.call(cmd)


def run_and_report(
    simbuild: SimBuild,
    module: str,
    env: dict,
    outcome: dict,
    *,
    seed: int,
    started: float,
    waves: bool,
    dump_name: str,
    write_gtkw: Callable[[Path, Path], Path],
    waves_target: str,
    as_json: bool,
    testcase: str | None = None,
) -> int:
    """Run cocotb ``module`` once on ``simbuild`` with ``env``; print the outcome (``outcome``
    plus build, pass and timing figures; JSON with ``as_json``) and return the exit code.

    With ``waves``, the dump is copied to ``build/waves/<dump_name>.<vcd|fst>`` and
    ``write_gtkw(dump, save)`` writes its save file beside it.
    """
    test_dir = simbuild.build_dir / f"run-{seed}"
    outcome = dict(outcome, build_s=round(simbuild.build_seconds, 2))
    outcome["build_cached"] = simbuild.cached
    try:
        run(simbuild, module, env=env, waves=waves, test_dir=test_dir, testcase=testcase, seed=seed)
        outcome["passed"] = True
    except AssertionError as error:
        outcome["passed"] = False
        outcome["error"] = str(error)
    outcome["seconds"] = round(time.perf_counter() - started, 2)
    if waves:
        if simbuild.sim == "verilator":
            source = test_dir / "dump.vcd"
        else:
            source = simbuild.build_dir / f"{simbuild.top}.fst"
        dump = WAVES / f"{dump_name}{source.suffix}"
        WAVES.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, dump)
        save = write_gtkw(dump, dump.with_suffix(".gtkw"))
        outcome.update(waveform=str(dump), gtkw=str(save))
    if as_json:
        print(json.dumps(outcome))
    else:
        print(
            ("PASS" if outcome["passed"] else "FAIL")
            + f" in {outcome['seconds']} s"
            + (f"; waves: {outcome['waveform']} (make {waves_target})" if waves else "")
        )
        if not outcome["passed"]:
            print(outcome["error"])
    return 0 if outcome["passed"] else 1
