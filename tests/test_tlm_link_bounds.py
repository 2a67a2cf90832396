"""tlm.link.bounds: the closed forms of a load study (zero-load latency, channel-load bound)
against the cycle-exact model and by hand."""

import pytest

from tlm.link.bounds import channel_load_bound, pair_weights, zero_load_latency
from tlm.link.config import LinkConfig
from tlm.link.measure import simulate
from tlm.link.patterns import HOTSPOT_FRACTION, PATTERNS


def test_channel_load_bound():
    # uniform on a 4-ring per dimension, ties going +: 3/4 of a flit per + channel per flit
    # offered per node, times 16/15 (no traffic to self)
    bound = channel_load_bound(LinkConfig((4, 4)), "uniform")
    assert bound["max_channel_load"] == pytest.approx(0.75 * 16 / 15)
    assert bound["bound"] == pytest.approx(1.0)
    # neighbour traffic: each link carries 1/4 of its node's flits
    assert channel_load_bound(LinkConfig((4, 4)), "neighbour")["max_channel_load"] == 0.25
    assert zero_load_latency(LinkConfig((4, 4)), "neighbour", 4) == 10


def test_zero_load_latency_is_the_model_at_low_load():
    """``2 H + 2 L`` with the mean hop count of uniform traffic (docs/noc.md's table)."""
    cfg = LinkConfig((4, 4))
    assert zero_load_latency(cfg, "uniform", 4) == pytest.approx(2 * 32 / 15 + 8)
    measured = simulate(cfg, "uniform", 0.01, 4000, length=4, seed=5)["latency_mean"]
    assert measured == pytest.approx(zero_load_latency(cfg, "uniform", 4), abs=0.3)


@pytest.mark.parametrize("pattern", PATTERNS)
def test_pair_weights_are_shares(pattern):
    """Each node's weights sum to one, but where the pattern sends nothing (transpose's
    diagonal, node 0's hot-spot share); no node sends to itself."""
    w = pair_weights(LinkConfig((4, 4)), pattern)
    want = [1.0] * 16
    if pattern == "transpose":
        want = [0.0 if node % 5 == 0 else 1.0 for node in range(16)]  # (c, c) -> itself
    if pattern == "hotspot":
        want[0] = 1 - HOTSPOT_FRACTION
    assert w.sum(axis=1).tolist() == pytest.approx(want)
    assert not w.diagonal().any()


def test_pair_weights_bad_pattern():
    with pytest.raises(ValueError) as error:
        pair_weights(LinkConfig((4, 4)), "random")
    assert str(error.value) == (
        "pattern must be one of uniform, transpose, neighbour, hotspot, all-to-all, not 'random'"
    )
