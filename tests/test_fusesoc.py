"""The FuseSoC core: every target runs on Edalize's flow API, and the lint targets (Verilator
-Wall on the generated RTL) are clean."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from verif.common.runner import BUILD, ROOT
from verif.common.toolchain import apply_environment

#: Every target of ``fusesoc.core``; the full-size ones (128x128 engine, 4x4x4 torus) take
#: minutes and 1.5-2 GiB in Verilator, so they run in ``make test-slow``.
TARGETS = [
    "lint",
    "lint_formats",
    "lint_link",
    "sim",
    "link_router",
    "server",
    pytest.param("default", marks=pytest.mark.slow),
    pytest.param("lint_full", marks=pytest.mark.slow),
    pytest.param("ultraserver", marks=pytest.mark.slow),
]


def test_every_target_is_tested():
    """A target added to the core is added here too."""
    import yaml

    core = yaml.safe_load((ROOT / "fusesoc.core").read_text().split("\n", 1)[1])
    tested = {t if isinstance(t, str) else t.values[0] for t in TARGETS}
    assert tested == set(core["targets"])


@pytest.mark.sim
@pytest.mark.parametrize("target", TARGETS)
def test_fusesoc_target_runs(target):
    """``lint``: the 8x8 int8 tensor engine; ``lint_formats``: the 8x8 engine with every
    format (the floating-point datapath); ``lint_link``: the 4x4 torus and its router, all
    under -Wall; ``sim``: the 8x8 engine elaborated in Icarus; the others elaborated by
    Verilator. No warning at all: neither Verilator's nor FuseSoC's (Edalize's deprecated
    tool API announces itself with one)."""
    # FuseSoC looks for cores under --cores-root, which holds build/: the cores its
    # generators wrote for other targets would be found there too (and replace each other,
    # with a warning), so it is told to skip build/.
    BUILD.mkdir(exist_ok=True)
    (BUILD / "FUSESOC_IGNORE").touch()
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
        timeout=900,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    assert "%Warning" not in output and "%Error" not in output, output[-4000:]
    assert "WARNING" not in output, output[-4000:]
