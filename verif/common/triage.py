"""What a failing bench run tells its reader: the seed it ran with, and the one command that
reruns exactly its parameters with waveforms (``make sim ...`` or ``make sim-link ...``).

A pytest entry point describes each bench run as a :class:`Rerun`; :func:`verif.common.runner.run`
puts its seed into cocotb's results and, on failure, its command into the error. On Icarus the
runner also runs that command itself (a small design builds in seconds), so the waveform of the
failure is already under ``build/waves/``, named by the seed, when the reader gets there.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Rerun", "TARGETS", "rerun_with_waves"]

#: The make targets that run one bench, and the simulator each names in its ``SIM`` variable.
TARGETS = ("sim", "sim-link")

_NAME = re.compile(r"^[A-Z][A-Z_]*$")

#: The project root, where the Makefile is.
ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Rerun:
    """One bench run as a ``make`` command line: the target, its variables, the seed.

    Parameters
    ----------
    target : str
        ``"sim"`` (the tensor engine) or ``"sim-link"`` (router, torus, collective).
    params : tuple of (str, object)
        Make variables in the order they are printed, e.g. ``(("SIM", "icarus"),
        ("ROWS", 4))``; ``SIM`` is required. Values print with ``str``.
    seed : int
        The bench's root seed (``SEED=``).

    Examples
    --------
    >>> Rerun("sim", (("SIM", "icarus"), ("ROWS", 2)), 7).command()
    'make sim SIM=icarus ROWS=2 SEED=7 WAVES=1'
    """

    target: str
    params: tuple[tuple[str, object], ...]
    seed: int

    def __post_init__(self):
        if self.target not in TARGETS:
            raise ValueError(f"target must be one of {', '.join(TARGETS)}, not {self.target!r}")
        if not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"seed must be a non-negative integer, not {self.seed!r}")
        names = [name for name, _ in self.params]
        for name in names:
            if not isinstance(name, str) or not _NAME.match(name) or name in ("SEED", "WAVES"):
                raise ValueError(
                    f"params names must be make variables in capitals other than SEED and "
                    f"WAVES, not {name!r}"
                )
        if len(set(names)) != len(names):
            raise ValueError(f"params name a variable twice: {names}")
        if "SIM" not in names:
            raise ValueError(f"params must name SIM, not only {names}")

    @property
    def sim(self) -> str:
        return str(dict(self.params)["SIM"])

    def variables(self, *, waves: bool = True) -> list[str]:
        """``NAME=value`` words of the command, ``SEED`` and ``WAVES`` last."""
        words = [f"{name}={value}" for name, value in self.params]
        return words + [f"SEED={self.seed}"] + (["WAVES=1"] if waves else [])

    def command(self, *, waves: bool = True) -> str:
        """The command line to paste into a shell at the project root."""
        return shlex.join(["make", self.target, *self.variables(waves=waves)])


def rerun_with_waves(rerun: Rerun, timeout_s: float = 900.0) -> tuple[bool, str | None, str]:
    """Run ``rerun.command()`` (with this interpreter as the Makefile's ``PY``).

    Returns ``(failed again, waveform path or None, last lines of its output)``.
    """
    env = dict(os.environ)
    env.pop("PYTEST_CURRENT_TEST", None)  # the rerun is a plain run, not a pytest node
    cmd = ["make", "--no-print-directory", "-s", "-C", str(ROOT), rerun.target]
    cmd += rerun.variables(waves=True) + [f"PY={sys.executable}"]
    done = subprocess.run(
        cmd, env=env, capture_output=True, text=True, timeout=timeout_s, check=False
    )
    out = done.stdout + done.stderr
    match = re.search(r"waves: (\S+)", out)
    tail = "\n".join(out.strip().splitlines()[-6:])
    return done.returncode != 0, match.group(1) if match else None, tail
