"""tlm.link.load: load figures, closed forms and bounds (``trnsim noc``: tests/test_studies.py)."""

import pytest

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
