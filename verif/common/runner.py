"""Build and run cocotb benches on Icarus or Verilator, with builds cached by content.

Each distinct (simulator, generated Verilog, options) gets its own build folder under
``build/sim/``, stamped with a hash of what went into it; a later run with the same inputs
skips generation and compilation. Verilator is built without ``--public-flat-rw``: only the top
module's ports are exposed to cocotb (a control file marks them, see :func:`ports`), which is
what makes a 128x128 build minutes instead of a quarter of an hour, and the simulation ten
times faster.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from cocotb_tools import runner as cocotb_runner

from .toolchain import TIMESCALE, apply_environment
from .triage import Rerun, rerun_with_waves

__all__ = [
    "ROOT",
    "BUILD",
    "SimBuild",
    "build",
    "ports",
    "run",
    "output_to",
    "SIMULATORS",
    "BenchFailure",
]

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "build"
SIMULATORS = ("icarus", "verilator")


class _Verilator(cocotb_runner.Verilator):
    """cocotb's Verilator runner without ``--public-flat-rw`` (see the module docstring);
    ``skip`` replays a cached build's configuration without compiling."""

    skip = False

    def _build_command(self):
        if self.skip:
            return []
        cmds = super()._build_command()
        cmds[0] = [arg for arg in cmds[0] if arg != "--public-flat-rw"]
        return cmds


class _Icarus(cocotb_runner.Icarus):
    """cocotb's Icarus runner; ``skip`` replays a cached build's configuration."""

    skip = False

    def _build_command(self):
        return [] if self.skip else super()._build_command()


def _runner(sim: str):
    if sim == "verilator":
        return _Verilator()
    if sim == "icarus":
        return _Icarus()
    raise ValueError(f"sim must be one of {', '.join(SIMULATORS)}, not {sim!r}")


@dataclass
class SimBuild:
    """A compiled simulation: where it lives and what it cost."""

    sim: str
    top: str
    build_dir: Path
    verilog: Path
    cached: bool
    build_seconds: float
    peak_rss_mib: float | None
    build_kwargs: dict

    def runner(self):
        """A cocotb runner configured as this build was, without compiling again."""
        runner = _runner(self.sim)
        runner.skip = True
        runner.build(**self.build_kwargs)
        return runner


def _hash(*parts) -> str:
    h = hashlib.sha1()
    for part in parts:
        h.update(part if isinstance(part, bytes) else json.dumps(part, sort_keys=True).encode())
    return h.hexdigest()[:16]


def _children_peak_rss_mib() -> float | None:
    try:
        import resource
    except ImportError:  # pragma: no cover - not on POSIX
        return None
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


def sources_hash(inputs) -> str:
    """Hash of source files (``.py`` under each folder, or single files) relative to the
    project root: the key of generated Verilog, so that editing a model the RTL does not
    import never forces a rebuild."""
    h = hashlib.sha1()
    for entry in inputs:
        path = ROOT / entry
        for source in sorted(path.rglob("*.py")) if path.is_dir() else [path]:
            h.update(source.relative_to(ROOT).as_posix().encode())
            h.update(source.read_bytes())
    return h.hexdigest()[:12]


def ports(verilog: Path, top: str) -> list[str]:
    """Names of the ports of module ``top`` in the Verilog file ``verilog``.

    Only these are made visible to cocotb. Verilator treats every variable a user may write
    through VPI as driven from outside the model, and re-evaluates all logic that reads one
    on every evaluation, several times per clock cycle under cocotb; exposing every signal
    of the top module made the whole engine around the array such logic.
    """
    text = Path(verilog).read_text()
    match = re.search(rf"^module\s+\\?{re.escape(top)}\s*\((.*?)\);", text, re.M | re.S)
    if match is None:
        raise ValueError(f"top={top!r}: no module of that name in {verilog}")
    return [name.strip() for name in match.group(1).split(",") if name.strip()]


def build(
    sim: str,
    verilog: Path,
    top: str,
    *,
    waves: bool = False,
    extra_args: tuple[str, ...] = (),
    hier_blocks: tuple[str, ...] = (),
    fresh: bool = False,
) -> SimBuild:
    """Compile ``verilog`` (top module ``top``) for ``sim``, or reuse an identical build.

    ``hier_blocks`` names modules Verilator compiles once and instantiates as a library
    (hierarchical verilation): without it, Verilator emits the code of every instance of a
    repeated module separately, and a 128x128 array becomes 190 MB of C++. ``fresh``
    discards a cached build first (benchmarks time the whole build).
    """
    apply_environment()
    verilog = Path(verilog)
    args = list(extra_args)
    sources = [verilog]
    if sim == "verilator":
        args += [
            "-Wno-fatal",
            "--x-assign",
            "fast",
            "--x-initial",
            "fast",
            "-O3",
            "--output-split",
            "20000",
            "--output-split-cfuncs",
            "2000",
        ]
        if hier_blocks:
            args += ["--hierarchical"]
    control_text = ""
    if sim == "verilator":
        lines = ["`verilator_config"]
        lines += [f'public_flat_rw -module "{top}" -var "{port}"' for port in ports(verilog, top)]
        lines += [f'hier_block -module "{block}"' for block in hier_blocks]
        control_text = "\n".join(lines) + "\n"
    key = _hash(sim, top, waves, args, hier_blocks, control_text, verilog.read_bytes())
    build_dir = BUILD / "sim" / f"{top}-{sim}-{key}"
    stamp = build_dir / "stamp.json"
    if sim == "verilator":
        control = build_dir / "public.vlt"
        sources.insert(0, cocotb_runner.VerilatorControlFile(control))  # top source last
    kwargs = dict(
        sources=sources,
        hdl_toplevel=top,
        build_dir=build_dir,
        build_args=args,
        timescale=TIMESCALE,
        waves=waves,
        always=True,
    )
    if fresh and build_dir.exists():
        shutil.rmtree(build_dir)
    if stamp.exists():
        info = json.loads(stamp.read_text())
        return SimBuild(
            sim, top, build_dir, verilog, True, info["seconds"], info["peak_rss_mib"], kwargs
        )
    build_dir.mkdir(parents=True, exist_ok=True)
    if sim == "verilator":
        control.write_text(control_text)
    start = time.perf_counter()
    _runner(sim).build(**kwargs)
    seconds = time.perf_counter() - start
    rss = _children_peak_rss_mib()
    stamp.write_text(json.dumps({"seconds": seconds, "peak_rss_mib": rss}))
    return SimBuild(sim, top, build_dir, verilog, False, seconds, rss, kwargs)


class BenchFailure(AssertionError):
    """A cocotb bench failed: the message names its seed and the command that reruns it."""


def run(
    simbuild: SimBuild,
    test_module: str,
    *,
    env: dict[str, str] | None = None,
    waves: bool = False,
    test_dir: Path | None = None,
    testcase: str | None = None,
    rerun: Rerun | None = None,
    seed: int | None = None,
) -> Path:
    """Run the cocotb ``test_module`` on a build; raise :class:`BenchFailure` if any test
    failed, inside pytest or not (cocotb's runner exits the process under pytest).

    cocotb's own random seed is ``seed``, else ``rerun``'s (the bench's). With ``rerun`` (the
    run as a ``make`` command), a failure's message begins with that seed and the command; on
    Icarus the command is run at once, so that the failure's waveform is kept under
    ``build/waves/``, named by the seed. Returns the results file (JUnit XML).
    """
    apply_environment()
    test_dir = Path(test_dir or simbuild.build_dir / "run")
    test_dir.mkdir(parents=True, exist_ok=True)
    results = test_dir / "results.xml"  # absolute: the same name inside pytest or not
    runner = simbuild.runner()
    try:
        runner.test(
            test_module=test_module,
            hdl_toplevel=simbuild.top,
            build_dir=simbuild.build_dir,
            test_dir=test_dir,
            extra_env={k: str(v) for k, v in (env or {}).items()},
            waves=waves,
            timescale=TIMESCALE,
            testcase=testcase,
            seed=seed if seed is not None or rerun is None else rerun.seed,
            results_xml=str(results),
        )
    except SystemExit as exit_:  # cocotb's runner under pytest, or a simulator that failed
        failures = _failures(results) or [f"the simulator exited with {exit_.code}"]
    else:
        failures = _failures(results)
    if failures:
        raise BenchFailure(_report(failures, rerun))
    return results


@contextlib.contextmanager
def output_to(path: Path):
    """Send this process's stdout and stderr (the simulator's and cocotb's) to ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    saved = [os.dup(1), os.dup(2)]
    with open(path, "ab") as log:
        try:
            os.dup2(log.fileno(), 1)
            os.dup2(log.fileno(), 2)
            yield
        finally:
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)


def _report(failures: list[str], rerun: Rerun | None) -> str:
    """The failure message: seed and rerun command first, then what cocotb reported, then
    the outcome of the rerun with waves (Icarus)."""
    lines = []
    if rerun is not None:
        lines += [
            f"bench failed with seed {rerun.seed}",
            f"rerun with waves: {rerun.command()}",
        ]
    lines += ["cocotb reported failures:"] + failures
    if rerun is not None and rerun.sim == "icarus":
        again, waveform, tail = rerun_with_waves(rerun)
        if waveform:
            lines.append(f"waves of the failure: {waveform}")
        lines.append("the rerun failed again" if again else "the rerun PASSED: not reproduced")
        if not waveform or not again:
            lines.append(tail)
    return "\n".join(lines)


def _failures(results: Path) -> list[str]:
    """Failed or errored test cases in a cocotb results file (it returns normally on
    failure outside pytest, TOOLCHAIN.md gotcha 9)."""
    if not results.exists():
        return [f"no results file at {results}: the simulator did not run the tests"]
    tree = ET.parse(results)
    cases = list(tree.iter("testcase"))
    if not cases:
        return [f"{results} lists no test cases"]
    bad = []
    for case in cases:
        for tag in ("failure", "error"):
            for node in case.iter(tag):
                bad.append(f"{case.get('name')}: {node.get('message') or node.text or tag}")
    return bad
