"""tlm.link.topology and tlm.link.routing: coordinates, links, DOR and the dateline rule."""

from itertools import product

import pytest

from tlm.link.config import LinkConfig
from tlm.link.routing import dateline_class, lane, out_vc, route
from tlm.link.topology import Torus, parse_shape, port_name


def test_numbering_and_links():
    t = Torus((4, 3, 2))
    assert [t.node(t.coord(i)) for i in range(t.nodes)] == list(range(24))
    links = list(t.links())
    assert len(links) == 24 * 6
    for node, port, peer, peer_port in links:  # every link comes back the other way
        assert t.node(t.neighbour(t.coord(node), port)) == peer
        assert t.node(t.neighbour(t.coord(peer), peer_port)) == node
    assert [port_name(p) for p in range(7)] == ["local", "x+", "x-", "y+", "y-", "z+", "z-"]
    assert parse_shape("4x4x4") == (4, 4, 4)
    assert Torus((4, 4)).mean_hops() == pytest.approx(32 / 15)  # 2 * 4 / 4 * 16 / 15


def walk(shape, src, dst):
    """Follow route() from src to dst; return the (coordinate, port, class) of each hop."""
    hops, here = [], src
    t = Torus(shape)
    for _ in range(100):
        port, cls = route(shape, here, src, dst)
        if port == 0:
            return hops
        hops.append((here, port, cls))
        here = t.neighbour(here, port)
    raise AssertionError("no arrival")


@pytest.mark.parametrize("shape", [(4, 4), (3, 5), (2, 4, 3), (5,)])
def test_routes_are_minimal_dimension_ordered_with_dateline(shape):
    t = Torus(shape)
    for src, dst in product(t.coords(), repeat=2):
        hops = walk(shape, src, dst)
        assert len(hops) == t.hops(src, dst)
        dims = [(p - 1) // 2 for _, p, _ in hops]
        assert dims == sorted(dims)
        for here, port, cls in hops:
            d, minus = divmod(port - 1, 2)
            k = shape[d]
            wrap = here[d] == (0 if minus else k - 1)
            if wrap:
                assert cls == 1  # the wrap link is always class 1
            # class 1 only from the wrap link on: the same dimension's later hops
            before = [h for h in hops if (h[1] - 1) // 2 == d and h is not None]
            i = before.index((here, port, cls))
            crossed = any(h[0][d] == (0 if minus else k - 1) for h in before[: i + 1])
            assert cls == int(crossed)


def test_dateline_class():
    assert [dateline_class(c, 1, 4, True) for c in range(4)] == [1, 0, 0, 1]
    assert [dateline_class(c, 2, 4, False) for c in range(4)] == [1, 0, 0, 1]


@pytest.mark.parametrize(
    "shape,message",
    [
        ((4, 1), "shape must be a tuple of 1 to 4 ring sizes, each 2..16, not (4, 1)"),
        ((2,) * 5, "shape must be a tuple of 1 to 4 ring sizes, each 2..16, not (2, 2, 2, 2, 2)"),
        ("4by4", "shape must look like 4x4 or 4x4x4, not '4by4'"),
    ],
)
def test_bad_shape(shape, message):
    with pytest.raises(ValueError) as error:
        parse_shape(shape)
    assert str(error.value) == message


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"vcs": 3}, "vcs must be a power of two in 2..8, not 3"),
        ({"depth": 0}, "depth must be a power of two in 1..64, not 0"),
        ({"inject_depth": 2}, "inject_depth must be a power of two in 4..256, not 2"),
        (
            {"len_bits": 0, "inject_depth": 1},
            "inject_depth must be a power of two in 2..256, not 1",
        ),
        ({"counter_bits": 0}, "counter_bits must be an integer in 1..32, not 0"),
        (
            {"shape": (16, 4), "coord_bits": 3},
            "coord_bits must hold every coordinate of (16, 4), not 3",
        ),
    ],
)
def test_bad_config(kwargs, message):
    kwargs = {"shape": (4, 4)} | kwargs
    with pytest.raises(ValueError) as error:
        LinkConfig(**kwargs)
    assert str(error.value) == message


@pytest.mark.parametrize("shape,vcs", [((4, 4), 2), ((4, 4, 4), 8), ((5,), 4)])
def test_requester_index(shape, vcs):
    """Requester 0 is the injection buffer; each (link port, VC) has its own index after it,
    port by port, and requester_link inverts it."""
    cfg = LinkConfig(shape, vcs=vcs)
    pairs = [(p, v) for p in range(1, cfg.ports) for v in range(vcs)]
    assert [cfg.requester(p, v) for p, v in pairs] == list(range(1, cfg.requesters))
    assert [cfg.requester_link(r) for r in range(1, cfg.requesters)] == pairs


@pytest.mark.parametrize(
    "call,message",
    [
        (lambda cfg: cfg.requester(0, 0), "port must be a link port 1..4, not 0"),
        (lambda cfg: cfg.requester(5, 0), "port must be a link port 1..4, not 5"),
        (lambda cfg: cfg.requester(1, 2), "vc must be a VC 0..1, not 2"),
        (lambda cfg: cfg.requester(True, 0), "port must be a link port 1..4, not True"),
        (lambda cfg: cfg.requester_link(0), "requester must be a link requester 1..8, not 0"),
        (lambda cfg: cfg.requester_link(9), "requester must be a link requester 1..8, not 9"),
    ],
)
def test_bad_requester(call, message):
    with pytest.raises(ValueError) as error:
        call(LinkConfig((4, 4)))
    assert str(error.value) == message


def test_lane_and_out_vc():
    """A packet keeps its lane (its VC mod V/2) and uses VC lane + (V/2) * class."""
    for vcs in (2, 4, 8):
        half = vcs // 2
        assert [lane(v, vcs) for v in range(vcs)] == [v % half for v in range(vcs)]
        for ln in range(half):
            assert [out_vc(ln, cls, vcs) for cls in (0, 1)] == [ln, ln + half]
            assert lane(out_vc(ln, 1, vcs), vcs) == ln
