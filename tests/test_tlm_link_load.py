"""tlm.link.load and ``trnsim noc``: load figures, closed forms and bounds, the command line."""

import json

import pytest

from tlm.cli import main
from tlm.link.config import LinkConfig
from tlm.link.load import channel_load_bound, simulate, zero_load_latency


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


def test_channel_load_bound():
    # uniform on a 4-ring per dimension, ties going +: 3/4 of a flit per + channel per flit
    # offered per node, times 16/15 (no traffic to self)
    bound = channel_load_bound(LinkConfig((4, 4)), "uniform")
    assert bound["max_channel_load"] == pytest.approx(0.75 * 16 / 15)
    assert bound["bound"] == pytest.approx(1.0)
    # neighbour traffic: each link carries 1/4 of its node's flits
    assert channel_load_bound(LinkConfig((4, 4)), "neighbour")["max_channel_load"] == 0.25
    assert zero_load_latency(LinkConfig((4, 4)), "neighbour", 4) == 10


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
