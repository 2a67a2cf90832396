"""Grade a target's benches: plant each mutation of a seeded sample in its generated design,
run every bench on the mutant, record which kill it (seed and first mismatch cycle), and check
each survivor for equivalence with the design."""

from __future__ import annotations

import contextlib
import re
import shutil
import signal
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from verif.common.runner import BenchFailure, build, output_to, run

from . import yosys
from .targets import Target

__all__ = ["IDENTITY", "SIM_TIMEOUT_S", "Kill", "Mutant", "grade_mutant", "grade"]

#: The mutation that changes nothing: Yosys writes the design back. Every bench must pass it.
IDENTITY = "mutate -mode none"
#: Wall-clock seconds one bench run may take on a mutant before it counts as hung (a mutated
#: combinational loop can spin a simulator forever in zero simulated time): far above a
#: bench's few seconds on these small targets.
SIM_TIMEOUT_S = 600.0


class _Hung(Exception):
    """A bench run outlived its wall-clock budget."""


@contextlib.contextmanager
def _deadline(seconds: float | None):
    """Raise :class:`_Hung` in this (main) thread after ``seconds``; the simulator's process,
    which cocotb's runner waits on with ``subprocess.run``, is killed as the exception unwinds
    through it. No deadline off the main thread (signals reach only the main thread)."""
    if not seconds or threading.current_thread() is not threading.main_thread():
        yield
        return

    def hung(signum, frame):
        raise _Hung

    previous = signal.signal(signal.SIGALRM, hung)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


_CYCLE = re.compile(r"cycle (\d+)")


@dataclass(frozen=True)
class Kill:
    """A bench that failed on a mutant: its seed, the first mismatch's cycle (``None`` when the
    message names none, e.g. a check at the end of the run) and the message's first line."""

    bench: str
    seed: int
    cycle: int | None
    message: str


@dataclass
class Mutant:
    """One mutation and what became of it.

    ``status``: ``killed`` (some bench failed), ``equivalent`` (no bench failed; Yosys
    proved the behaviour unchanged, or ``classified`` argues it), ``proof`` (beyond the
    benches, a formal property checks the logic: ``classified``), ``survived`` (none of
    these) or, for the identity, ``identity``.
    """

    id: int
    mutation: str
    kills: list[Kill] = field(default_factory=list)
    survived_by: list[str] = field(default_factory=list)
    status: str = "survived"
    equivalence: dict | None = None
    classified: dict | None = None
    seconds: float = 0.0

    @property
    def src(self) -> str:
        """The design lines (``design.v:LINE``) Yosys names for the mutated cell."""
        return " ".join(re.findall(r"-src (\S+)", self.mutation))

    def as_dict(self) -> dict:
        return asdict(self) | {"src": self.src}


def grade_mutant(
    target: Target,
    design: Path,
    mutant: Mutant,
    sim: str,
    folder: Path,
    *,
    init: bool = True,
    timeout_s: float | None = SIM_TIMEOUT_S,
) -> Mutant:
    """Build ``mutant`` on ``sim`` and run every bench of ``target`` on it (each bench's seeds
    in turn until one fails); fills ``kills``, ``survived_by`` and ``status``. ``init=False``
    builds it without initial values (the power-up test: only the reset defines the state).
    A bench run past ``timeout_s`` seconds is stopped and counts as a kill (the mutant hangs
    the simulation), its message saying so."""
    start = time.perf_counter()
    verilog = yosys.write_mutant(design, mutant.mutation, folder / f"{target.top}.v", init=init)
    log = folder / "sim.log"
    log.unlink(missing_ok=True)
    with output_to(log):
        simbuild = build(sim, verilog, target.top)
    try:
        for bench in target.benches:
            for seed in bench.seeds:
                kill = _run(simbuild, bench, seed, folder, log, timeout_s)
                if kill is not None:
                    mutant.kills.append(kill)
                    break
            else:
                mutant.survived_by.append(bench.name)
    finally:
        shutil.rmtree(simbuild.build_dir, ignore_errors=True)  # one build per mutant
    mutant.status = "killed" if mutant.kills else "survived"
    mutant.seconds = round(time.perf_counter() - start, 2)
    return mutant


def _run(simbuild, bench, seed: int, folder: Path, log: Path, timeout_s=None) -> Kill | None:
    test_dir = folder / f"{bench.name}-{seed}"
    env = bench.environment(seed) | {"COVERAGE_DIR": folder / "coverage"}
    try:
        with output_to(log), _deadline(timeout_s):
            run(
                simbuild,
                bench.module,
                env=env,
                test_dir=test_dir,
                testcase=bench.testcase,
                seed=seed,
            )
    except _Hung:
        return Kill(bench.name, seed, None, f"hung: no result within {timeout_s:g} s (wall clock)")
    except BenchFailure as failure:
        lines = str(failure).splitlines()
        first = lines[1] if len(lines) > 1 else lines[0]  # after "cocotb reported failures:"
        cycle = _CYCLE.search(first)
        return Kill(bench.name, seed, int(cycle.group(1)) if cycle else None, first[:300])
    return None


def grade(
    target: Target,
    mutations: list[str],
    sim: str,
    out: Path,
    *,
    equiv_timeout_s: float,
    sim_timeout_s: float | None = SIM_TIMEOUT_S,
    classified: dict | None = None,
    progress=None,
) -> list[Mutant]:
    """Grade ``target``'s benches on the identity and each of ``mutations``; ``out`` is the
    target's folder (its ``design.il`` made by :func:`verif.mutate.yosys.prepare`).

    Survivors are checked by :func:`verif.mutate.yosys.equivalence`: ``equivalent`` when
    proven, else as ``classified`` (``(target, mutation) -> entry``,
    :func:`verif.mutate.survivors.load`) says, else ``survived``.
    """
    design = out / "design.il"
    mutants = []
    for i, mutation in enumerate([IDENTITY, *mutations]):
        folder = out / f"m{i:03d}"
        mutant = grade_mutant(
            target, design, Mutant(i, mutation), sim, folder, timeout_s=sim_timeout_s
        )
        if i == 0:
            mutant.status = "identity" if not mutant.kills else "killed"
        elif not mutant.kills:
            check = yosys.equivalence(
                design,
                mutation,
                out / f"m{i:03d}",
                timeout_s=equiv_timeout_s,
            )
            mutant.equivalence = asdict(check)
            entry = (classified or {}).get((target.name, mutation))
            if check.verdict == "proven":
                mutant.status = "equivalent"
            elif entry is not None:
                mutant.classified = entry
                mutant.status = entry["class"]
        mutants.append(mutant)
        if progress is not None:
            progress(mutant)
    return mutants
