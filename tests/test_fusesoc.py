"""The FuseSoC core: its lint targets (Verilator -Wall on the generated RTL) are clean."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from verif.common.runner import BUILD, ROOT
from verif.common.toolchain import apply_environment


@pytest.mark.sim
@pytest.mark.parametrize("target", ["lint", "lint_formats", "lint_link"])
def test_fusesoc_lint_target_is_clean(target):
    """``lint``: the 8x8 int8 tensor engine; ``lint_formats``: the 8x8 engine with every
    format (the floating-point datapath); ``lint_link``: the 4x4 torus and its router."""
    work = BUILD / "fusesoc" / target  # each target its own work folder
    work.mkdir(parents=True, exist_ok=True)
    env = apply_environment(dict(os.environ))
    fusesoc = Path(sys.executable).parent / "fusesoc"
    result = subprocess.run(
        [
            str(fusesoc),
            "--cores-root",
            str(ROOT),
            "run",
            "--target",
            target,
            "trnsim:tensor:engine",
        ],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    assert "%Warning" not in output and "%Error" not in output, output[-4000:]
