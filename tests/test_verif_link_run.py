"""``python -m verif.link.run`` (``make sim-link``, ``make waves-link``): one bench run (random
traffic, or an all-gather with ``--collective``) with its seed printed, a waveform whose save
file names only signals the dump holds, clear errors."""

import re
import shutil
import subprocess

import pytest

import verif.common.run
from verif.link import run


def dump_signals(fst) -> set[str]:
    """Every signal of an FST as GTKWave names it: ``scope.sub.name[msb:0]``."""
    if shutil.which("fst2vcd") is None:
        pytest.fail("fst2vcd (GTKWave) is not installed: run `make setup`")
    header = subprocess.run(
        ["fst2vcd", "-o", "/dev/stdout", str(fst)], capture_output=True, text=True, check=True
    ).stdout.split("$enddefinitions")[0]
    names, scope = set(), []
    for line in header.splitlines():
        words = line.split()
        if words[:1] == ["$scope"]:
            scope.append(words[2])
        elif words[:1] == ["$upscope"]:
            scope.pop()
        elif words[:1] == ["$var"]:
            rng = words[5] if words[5].startswith("[") else ""
            names.add(".".join([*scope, words[4].lstrip("\\")]) + rng)
    return names


@pytest.mark.sim
@pytest.mark.parametrize(
    "args",
    [
        ["--block", "link_router", "--shape", "4x4", "--packets", "4"],
        ["--block", "link_router", "--shape", "4x4", "--misuse", "--depth", "2"],
        ["--shape", "4x4", "--packets", "3"],
        ["--collective", "rdh", "--count", "32", "--patterns", "always:always"],
    ],
    ids=["router", "router-misuse", "torus", "all-gather"],
)
def test_one_run_with_waves(args, capsys, seed):
    assert run.main([*args, "--seed", str(seed), "--waves", "--json"]) == 0
    out = capsys.readouterr().out
    assert f"seed {seed} (rerun with --seed {seed})" in out
    outcome = [line for line in out.splitlines() if line.startswith("{")][-1]
    gtkw = re.search(r'"gtkw": "([^"]+)"', outcome).group(1)
    dump = re.search(r'"waveform": "([^"]+)"', outcome).group(1)
    assert '"passed": true' in outcome
    traces = [
        line.strip() for line in open(gtkw).read().splitlines() if line and line[0] not in "[*@-"
    ]
    assert len(traces) > 10
    missing = set(traces) - dump_signals(dump)
    assert not missing, f"save file names signals the dump lacks: {sorted(missing)[:5]}"


def test_bad_arguments(capsys):
    assert run.main(["--shape", "4x"]) == 2
    assert "shape" in capsys.readouterr().err
    assert run.main(["--block", "link_router", "--coord", "9,9"]) == 2
    assert capsys.readouterr().err == (
        "python -m verif.link.run: error: coord must be a node of the torus (4, 4) like 1,2, "
        "not '9,9'\n"
    )
    assert run.main(["--collective", "ring", "--shape", "4x4x4"]) == 2
    assert capsys.readouterr().err == (
        "python -m verif.link.run: error: shape must be 4x4 with --collective (trn2-server's "
        "torus), not '4x4x4'\n"
    )
    assert run.main(["--collective", "ring", "--count", "24"]) == 2
    assert "count must be a positive multiple of 16" in capsys.readouterr().err


def test_open_waves(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(verif.common.run, "WAVES", tmp_path)
    monkeypatch.delenv("DISPLAY", raising=False)
    assert run.main(["--open-waves"]) == 2
    assert "run `make sim-link WAVES=1` first" in capsys.readouterr().err
    (tmp_path / "tensor_engine_8x8_icarus.gtkw").write_text("")  # not a link waveform
    assert run.main(["--open-waves"]) == 2
    (tmp_path / "link_torus_4x4_v2d4w64_icarus.gtkw").write_text("")
    assert run.main(["--open-waves"]) == 0
    assert "gtkwave " + str(tmp_path / "link_torus_4x4_v2d4w64_icarus.gtkw") in (
        capsys.readouterr().out
    )
