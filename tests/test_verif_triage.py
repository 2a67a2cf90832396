"""Triage of a failing bench (verif/common/triage.py): the JUnit report records each bench's
seed, and a failure names that seed and the one ``make sim...`` line that reruns exactly the
test's parameters with waves; on Icarus the waves of the failure are kept, named by the seed."""

import os
import shlex
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from tlm.link.config import LinkConfig
from tlm.tensor.config import EngineConfig
from verif.common.runner import ROOT
from verif.common.toolchain import have_simulator
from verif.common.triage import Rerun
from verif.link import run as link_run
from verif.tensor.run import rerun as tensor_rerun


def test_rerun_command():
    again = Rerun("sim-link", (("BLOCK", "torus"), ("SIM", "icarus"), ("PATTERNS", "a:b,c:d")), 5)
    assert again.command() == "make sim-link BLOCK=torus SIM=icarus PATTERNS=a:b,c:d SEED=5 WAVES=1"
    assert again.command(waves=False).endswith("SEED=5")
    assert again.sim == "icarus"


@pytest.mark.parametrize(
    "args,message",
    [
        (("run", (("SIM", "icarus"),), 1), "target must be one of sim, sim-link, not 'run'"),
        (("sim", (("SIM", "icarus"),), -1), "seed must be a non-negative integer, not -1"),
        (
            ("sim", (("SIM", "icarus"), ("SEED", 3)), 1),
            "params names must be make variables in capitals other than SEED and WAVES, not 'SEED'",
        ),
        (("sim", (("SIM", "x"), ("SIM", "y")), 1), "params name a variable twice: ['SIM', 'SIM']"),
        (("sim", (("ROWS", 2),), 1), "params must name SIM, not only ['ROWS']"),
    ],
)
def test_rerun_checks_its_arguments(args, message):
    with pytest.raises(ValueError) as error:
        Rerun(*args)
    assert str(error.value) == message


def make_n(again: Rerun) -> list[str]:
    """The command ``make`` would run for ``again``, as words."""
    out = subprocess.run(
        ["make", "-n", "-s", "-C", str(ROOT), again.target, *again.variables(), "PY=python"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return shlex.split(out.replace("\\\n", " "))


def test_make_sim_takes_every_parameter_of_the_tensor_tests():
    cfg = EngineConfig(3, 2, "all")
    again = tensor_rerun("icarus", cfg, 9, ops=12, max_n=8, patterns="always:1of2:random")
    words = make_n(again)
    assert words[:3] == ["python", "-m", "verif.tensor.run"]
    flags = {w: words[i + 1] for i, w in enumerate(words[:-1]) if w.startswith("--")}
    assert {k: flags.get(k) for k in ("--rows", "--cols", "--ops", "--max-n", "--seed")} == {
        "--rows": "3",
        "--cols": "2",
        "--ops": "12",
        "--max-n": "8",
        "--seed": "9",
    }
    assert flags["--patterns"] == "always:1of2:random"
    assert EngineConfig(3, 2, flags["--format"]).formats == cfg.formats  # the same codes
    assert "--waves" in words


@pytest.mark.parametrize(
    "block,testcase,env",
    [
        ("link_router", "lockstep", {"LINK_COORD": "1,2", "LINK_PACKETS": 8}),
        (
            "link_router",
            "misuse",
            {
                "LINK_COORD": "1,2",
                "LINK_PATTERNS": "always:random:1of4",
                "LINK_ROGUE": 3,
                "LINK_SPURIOUS": 0.25,
            },
        ),
        (
            "torus",
            "traffic",
            {"LINK_PACKETS": 500, "LINK_TRAFFIC": "transpose", "LINK_MALFORMED": 0},
        ),
        ("torus", "last_cycle_drop", {}),
        ("torus", None, {"COLL_ALGO": "rdh", "COLL_FORMAT": "fp32", "COLL_COUNT": 32}),
    ],
    ids=["router", "router-misuse", "torus", "last-drop", "all-gather"],
)
def test_make_sim_link_takes_every_parameter_of_the_link_tests(block, testcase, env):
    cfg = LinkConfig((4, 4), depth=2)
    words = make_n(link_run.rerun("icarus", block, cfg, 11, testcase, env))
    assert words[:3] == ["python", "-m", "verif.link.run"]
    args = link_run.parser().parse_args(words[3:])
    assert (args.block, args.shape, args.vcs, args.depth, args.seed, args.waves) == (
        block,
        "4x4",
        2,
        2,
        11,
        True,
    )
    assert link_run._testcase(args) == (testcase or "all_gather")
    fields = {
        "LINK_COORD": "coord", "LINK_PACKETS": "packets", "LINK_TRAFFIC": "traffic",
        "LINK_PATTERNS": "patterns", "LINK_MALFORMED": "malformed", "LINK_ROGUE": "rogue",
        "LINK_SPURIOUS": "spurious", "COLL_ALGO": "collective", "COLL_FORMAT": "format",
        "COLL_COUNT": "count",
    }  # fmt: skip
    got = {name: getattr(args, fields[name]) for name in env}
    assert got == {name: type(got[name])(value) for name, value in env.items()}


def test_a_link_parameter_make_cannot_set_is_an_error():
    with pytest.raises(ValueError) as error:
        link_run.rerun("icarus", "torus", LinkConfig((4, 4)), 1, "traffic", {"LINK_NEW": 1})
    assert str(error.value) == "env has variables make sim-link cannot set: LINK_NEW"


@pytest.mark.sim
def test_a_planted_failure_names_its_seed_and_rerun(tmp_path, seed):
    """A wrong expectation planted in the tensor scoreboard (TE_PLANT_MISMATCH) fails a real
    test of the regression: the JUnit report holds the seed as a property and a message that
    begins with the seed and the make line; the rerun with waves failed again and left its
    waveform under build/waves/, named by the seed."""
    if not have_simulator("icarus"):
        pytest.fail("icarus is not installed: run `make setup`")
    planted = (seed + 1) % (1 << 31)  # not the seed a concurrent test_icarus[1-4] runs with
    junit = tmp_path / "junit.xml"
    env = dict(os.environ, TE_PLANT_MISMATCH="1", PYTHONPATH=str(ROOT))
    env.pop("PYTEST_XDIST_WORKER", None)
    node = "tests/test_verif_tensor.py::test_icarus[1-4]"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", node,
         "--seed", str(planted), f"--junitxml={junit}"],
        cwd=ROOT, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout[-2000:]
    case = next(ET.parse(junit).iter("testcase"))
    assert case.get("name") == "test_icarus[1-4]"
    assert {p.get("name"): p.get("value") for p in case.iter("property")} == {"seed": str(planted)}
    message = case.find("failure").get("message").splitlines()
    command = (
        "make sim SIM=icarus ROWS=1 COLS=4 FORMAT=int8 OPS=10 MAX_N=16 PATTERNS="
        "always:always:always,1of2:3of4:always,always:always:3of4,always:always:1of4,"
        f"random:random:random SEED={planted} WAVES=1"
    )
    assert message[:2] == [
        f"verif.common.runner.BenchFailure: bench failed with seed {planted}",
        f"rerun with waves: {command}",
    ]
    text = case.find("failure").text
    assert "TLM expects" in text and f"(seed {planted})" in text
    assert "the rerun failed again" in text
    waves = ROOT / "build" / "waves" / f"tensor_engine_r1c4_int8_icarus_seed{planted}.fst"
    assert f"waves of the failure: {waves}" in text
    assert waves.stat().st_size > 0
    assert command in done.stdout  # and on the console
