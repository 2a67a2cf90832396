"""The FuseSoC core: its lint target (Verilator -Wall on the generated RTL) is clean."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from verif.common.runner import BUILD, ROOT
from verif.common.toolchain import apply_environment


@pytest.mark.sim
def test_fusesoc_lint_target_is_clean():
    work = BUILD / "fusesoc"
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
            "lint",
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
