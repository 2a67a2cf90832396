"""tlm.link.measure: one load point's figures and its input checks (``trnsim noc``:
tests/test_studies.py)."""

import pytest

from tlm.link.config import LinkConfig
from tlm.link.measure import simulate


def test_low_load_latency_near_closed_form():
    cfg = LinkConfig((4, 4))
    r = simulate(cfg, "uniform", 0.02, 4000, length=1, seed=3)
    assert r["offered"] == pytest.approx(0.02, rel=0.2)
    assert r["accepted"] == pytest.approx(r["offered"], rel=0.05)
    # 3 H + 2 L + 1 with H = 32 / 15 mean hops between distinct nodes of a 4x4 torus
    assert r["zero_load_latency"] == pytest.approx(3 * 32 / 15 + 3)
    assert r["zero_load_latency"] <= r["latency_mean"] < r["zero_load_latency"] + 0.5


def test_above_saturation_accepted_is_flat():
    cfg = LinkConfig((4, 4))
    high = simulate(cfg, "uniform", 0.9, 3000)
    higher = simulate(cfg, "uniform", 1.0, 3000)
    assert high["accepted"] < high["offered"] - 0.2
    assert higher["accepted"] == pytest.approx(high["accepted"], abs=0.05)
    assert len(high["links"]) == 16 * 4


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
@pytest.mark.parametrize("engine", ["compiled", "python"])
def test_bad_arguments(kwargs, message, engine):
    """Checked where they enter, for both engines: a warm-up that leaves no measured cycle
    (formerly a ZeroDivisionError or an offered load of -0.0), a bool for a number, a negative
    seed (formerly numpy's message)."""
    with pytest.raises(ValueError) as error:
        simulate(LinkConfig((4, 4)), **({"cycles": 50} | kwargs), engine=engine)
    assert str(error.value) == message
