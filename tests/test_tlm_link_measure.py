"""tlm.link.measure and ``trnsim noc``: one load point's figures, its input checks, the command
line."""

import json

import pytest

from tlm.cli import main
from tlm.link.config import LinkConfig
from tlm.link.measure import simulate


def test_low_load_latency_near_closed_form():
    cfg = LinkConfig((4, 4))
    r = simulate(cfg, "uniform", 0.02, 4000, length=1, seed=3)
    assert r["offered"] == pytest.approx(0.02, rel=0.2)
    assert r["accepted"] == pytest.approx(r["offered"], rel=0.05)
    # 2 H + 2 L with H = 32 / 15 mean hops between distinct nodes of a 4x4 torus
    assert r["zero_load_latency"] == pytest.approx(2 * 32 / 15 + 2)
    assert r["zero_load_latency"] <= r["latency_mean"] < r["zero_load_latency"] + 0.5


def test_above_saturation_accepted_is_flat():
    cfg = LinkConfig((4, 4))
    high = simulate(cfg, "uniform", 0.9, 3000)
    higher = simulate(cfg, "uniform", 1.0, 3000)
    assert high["accepted"] < high["offered"] - 0.2
    assert higher["accepted"] == pytest.approx(high["accepted"], abs=0.05)
    assert len(high["links"]) == 16 * 4


def test_cli_json(capsys):
    assert main(["noc", "--shape", "4x4", "--rate", "0.1", "--cycles", "500", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["shape"] == "4x4" and row["traffic"] == "uniform" and len(row["links"]) == 64


def test_cli_table(capsys):
    args = ["noc", "--shape", "2x2x2", "--traffic", "neighbour", "--cycles", "300"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "link utilisation by direction" in out and "latency_p99" in out


@pytest.mark.parametrize(
    "args,message",
    [
        (["--rate", "1.5"], "rate must be a load in 0..1 flits per node per cycle, not 1.5"),
        (["--cycles", "0"], "cycles must be a positive integer, not 0"),
        (["--length", "5"], "length must be an integer in 1..4, not 5"),
        (["--shape", "4x1"], "shape must be a tuple of 1 to 4 ring sizes, each 2..16, not (4, 1)"),
        (
            ["--shape", "4x2", "--traffic", "transpose"],
            "transpose needs a symmetric shape, not (4, 2)",
        ),
    ],
)
def test_cli_errors(args, message, capsys):
    assert main(["noc", *args]) == 2
    assert capsys.readouterr().err.strip() == f"trnsim noc: error: {message}"


def test_cli_sweep(capsys):
    args = ["noc", "--shape", "4x4", "--rate", "0.05,0.2", "--cycles", "800", "--json"]
    assert main(args) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["rate"] for r in rows] == [0.05, 0.2]
    assert rows[1]["accepted"] == pytest.approx(0.2, abs=0.03)
    assert main(["noc", "--shape", "4x4", "--rate", "0.05,0.2", "--cycles", "300"]) == 0
    out = capsys.readouterr().out
    assert "offered" in out and "0.05" in out and "0.2" in out


def test_cli_bad_rate_list(capsys):
    with pytest.raises(SystemExit):
        main(["noc", "--rate", "0.1,x"])
    assert "expected loads separated by commas, not '0.1,x'" in capsys.readouterr().err


@pytest.mark.parametrize(
    "kwargs,message",
    [
        (
            {"cycles": 100, "warmup": 100},
            "warmup must be an integer in 0..cycles - 1 = 99 (cycles is 100: the figures are"
            " measured after the warm-up), not 100",
        ),
        (
            {"cycles": 100, "warmup": 250},
            "warmup must be an integer in 0..cycles - 1 = 99 (cycles is 100: the figures are"
            " measured after the warm-up), not 250",
        ),
        (
            {"cycles": 100, "warmup": -1},
            "warmup must be an integer in 0..cycles - 1 = 99 (cycles is 100: the figures are"
            " measured after the warm-up), not -1",
        ),
        ({"rate": True}, "rate must be a load in 0..1 flits per node per cycle, not True"),
        ({"seed": -1}, "seed must be a non-negative integer, not -1"),
        ({"seed": 1.5}, "seed must be a non-negative integer, not 1.5"),
        ({"length": True}, "length must be an integer in 1..4, not True"),
        ({"cycles": True}, "cycles must be a positive integer, not True"),
    ],
)
@pytest.mark.parametrize("engine", ["fast", "python"])
def test_bad_arguments(kwargs, message, engine):
    """Checked where they enter, for both engines: a warm-up that leaves no measured cycle
    (formerly a ZeroDivisionError or an offered load of -0.0), a bool for a number, a negative
    seed (formerly numpy's message)."""
    with pytest.raises(ValueError) as error:
        simulate(LinkConfig((4, 4)), **({"cycles": 50} | kwargs), engine=engine)
    assert str(error.value) == message
