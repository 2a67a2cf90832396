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
    # one hop, 4 flits: 3 H + 2 L + 1
    assert zero_load_latency(LinkConfig((4, 4)), "neighbour", 4) == 3 * 1 + 2 * 4 + 1


def test_zero_load_latency_is_the_model_at_low_load():
    """``3 H + 2 L + 1`` with the mean hop count of uniform traffic (docs/noc.md's table)."""
    cfg = LinkConfig((4, 4))
    assert zero_load_latency(cfg, "uniform", 4) == pytest.approx(3 * 32 / 15 + 2 * 4 + 1)
    measured = simulate(cfg, "uniform", 0.01, 4000, length=4, seed=5)["latency_mean"]
    # the sample's mean hop count differs from H by up to about 0.15: 0.45 cycles at 3 a hop
    assert measured == pytest.approx(zero_load_latency(cfg, "uniform", 4), abs=0.45)


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


def _reference_bound(cfg, pattern):
    """The bound walked pair by pair with :func:`route` from every source (the definition,
    as bounds.py computed it before it summed per displacement)."""
    from tlm.link.routing import route

    torus = cfg.torus
    w = pair_weights(cfg, pattern)
    load = {}
    coords = torus.coords()
    for s in range(torus.nodes):
        for d in range(torus.nodes):
            if w[s, d] == 0:
                continue
            here = coords[s]
            while True:
                port, _ = route(torus.shape, here, coords[s], coords[d])
                if port == 0:
                    break
                key = (torus.node(here), port)
                load[key] = load.get(key, 0.0) + w[s, d]
                here = torus.neighbour(here, port)
    return max(load.values(), default=0.0), w.sum(axis=0).max()


@pytest.mark.parametrize(
    "shape", [(4, 4), (3, 5), (4, 4, 4), (2, 3), (4, 6), (2, 2, 2), (5,), (6, 6)]
)
@pytest.mark.parametrize("pattern", PATTERNS)
def test_bound_is_the_pair_by_pair_walk(shape, pattern):
    """Summed per displacement and a hop at a time for all pairs, the busiest channel and
    ejection are the pair-by-pair walk's (odd rings: no tie; even: the + tie at half way)."""
    cfg = LinkConfig(shape)
    if pattern == "transpose" and shape != shape[::-1]:
        with pytest.raises(ValueError, match="transpose needs a symmetric shape"):
            channel_load_bound(cfg, pattern)
        return
    g, eject = _reference_bound(cfg, pattern)
    got = channel_load_bound(cfg, pattern)
    assert got["max_channel_load"] == pytest.approx(g, rel=1e-12, abs=1e-15)
    assert got["max_eject_load"] == pytest.approx(eject, rel=1e-12)


def test_large_tori_take_no_pair_matrix():
    """65,536 nodes: the bound and the zero-load latency without an N x N matrix (it asked
    numpy for 32 GiB); uniform on 16-rings: 16 / 4 x 65,536 / 65,535 flits on the busiest +
    channel of each dimension (a + tie at 8 hops)."""
    cfg = LinkConfig((16, 16, 16, 16))
    b = channel_load_bound(cfg, "uniform")
    mean_plus = (sum(range(1, 9)) + 0) / 16  # + hops per ring: 1..8 (8 is the tie)
    assert b["max_channel_load"] == pytest.approx(mean_plus * 65536 / 65535)
    assert zero_load_latency(cfg, "uniform", 1) == pytest.approx(3 * 4 * 4 * 65536 / 65535 + 3)
