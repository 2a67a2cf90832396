"""What every part of ``make bench`` shares: where figures go, and timing ``python -m hdl``."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["ROOT", "OUT", "generate", "build_in_child", "best_time"]

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "build" / "bench"


def best_time(fn, repeat: int = 5) -> float:
    """The shortest wall time of ``repeat`` calls of ``fn``, in seconds: the figure least
    disturbed by the rest of a shared machine."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def generate(block: str, args: list[str], out: Path) -> tuple[float, dict]:
    """Generate ``block`` with ``python -m hdl`` in a fresh interpreter (as FuseSoC and
    ``make gen`` run it); return the wall time in seconds and the generator's figures."""
    start = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "hdl", block, *args, "-o", str(out), "--json"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    return time.perf_counter() - start, json.loads(result.stdout)


_BUILD_CHILD = """
import json, resource
from verif.common.toolchain import apply_environment
apply_environment()
{setup}
b = {call}
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024 / 1024
print(json.dumps({{"seconds": b.build_seconds, "peak_gib": peak}}))
"""


def build_in_child(setup: str, call: str) -> dict:
    """A fresh simulator build in its own interpreter, so that its peak memory is its own
    (``RUSAGE_CHILDREN`` of one process is the largest of all its children so far).

    ``setup`` holds the imports, ``call`` the expression that builds (with ``fresh=True``)
    and returns a :class:`verif.common.runner.SimBuild`. Returns its seconds and peak GiB.
    """
    result = subprocess.run(
        [sys.executable, "-c", _BUILD_CHILD.format(setup=setup, call=call)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    if result.returncode:
        raise RuntimeError(f"{call} failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])
