"""tlm.link.ports: one injection and ejection port per node (the RTL's) or one per link
direction, in the per-router and the compiled model alike (docs/collectives.md, "The flit
engine")."""

import pytest

from tlm.link.compiled import CompiledNetwork
from tlm.link.config import LinkConfig
from tlm.link.network import RouterNetwork
from tlm.link.ports import Ports
from tlm.link.router import Router

CFG = LinkConfig((4, 4))
FMT = CFG.fmt
X_PLUS, X_MINUS, Y_PLUS, Y_MINUS = 1, 2, 3, 4
MODELS = [RouterNetwork, CompiledNetwork]


def _run(net, offers, cycles):
    """Step ``net`` for ``cycles`` cycles with ``offers[c]`` (port id -> flit) in cycle ``c``:
    per cycle, the ids that accepted and the ``{id: flit}`` ejected."""
    out = []
    for c in range(cycles):
        step = net.step(offers[c] if c < len(offers) else {})
        out.append((sorted(step.accepted), dict(step.ejected)))
    return out


def test_the_layout():
    one, each = Ports(CFG), Ports(CFG, "per_direction")
    assert (one.count, one.requesters, one.outputs) == (1, CFG.requesters, CFG.ports)
    assert one.inject_requester == (0,) and one.local_output == (0,) * CFG.requesters
    assert each.count == CFG.ports == 5
    assert each.inject_requester == (0, 9, 10, 11, 12)  # after LinkConfig's link requesters
    assert each.eject_output == (0, 5, 6, 7, 8)  # after the router's ports
    # a packet ending here leaves at the ejection port of the link it arrived on
    for port in range(1, CFG.ports):
        for vc in range(CFG.vcs):
            assert each.local_output[CFG.requester(port, vc)] == each.eject_output[port]
    assert [each.local_output[r] for r in each.inject_requester] == [0] * 5
    # the first hop of dimension-order routing; port 0 for a packet to itself
    here = (1, 1)
    want = {(2, 1): X_PLUS, (3, 1): X_PLUS, (0, 1): X_MINUS, (3, 3): X_PLUS, (1, 2): Y_PLUS}
    want |= {(1, 0): Y_MINUS, (0, 3): X_MINUS, (1, 1): 0}
    for dst, port in want.items():
        assert each.injection_port(here, dst) == port, dst
        assert one.injection_port(here, dst) == 0


@pytest.mark.parametrize("model", MODELS)
def test_four_packets_start_in_one_cycle(model):
    """Node 0 sends one single-flit packet to each neighbour in the same cycle: under
    ``per_direction`` all four are accepted at once, leave on the four links together and
    arrive together (``3 H + 3`` cycles); under ``single`` they go one cycle apart."""
    t = CFG.torus
    dests = [t.node(c) for c in [(1, 0), (3, 0), (0, 1), (0, 3)]]
    flits = {d: FMT.head(t.coord(d), (0, 0), 1, seq=d) for d in dests}
    net = model(CFG, ports="per_direction")
    ids = {d: net.injection_port(0, d) for d in dests}
    assert ids == {dests[0]: X_PLUS, dests[1]: X_MINUS, dests[2]: Y_PLUS, dests[3]: Y_MINUS}
    steps = _run(net, [{ids[d]: flits[d] for d in dests}], 8)
    assert steps[0][0] == sorted(ids.values())  # all four accepted in cycle 0
    if model is RouterNetwork:  # in the link registers together after cycle 2 (grant, traverse)
        net2 = RouterNetwork(CFG, ports="per_direction")
        net2.step({ids[d]: flits[d] for d in dests})
        net2.step()
        net2.step()
        links = net2.routers[0].link_reg
        assert [links[p] is not None for p in range(1, 5)] == [True] * 4
    # each arrives at its neighbour over the link facing node 0, in cycle 3 H + 3 = 6
    arrive = {X_PLUS: X_MINUS, X_MINUS: X_PLUS, Y_PLUS: Y_MINUS, Y_MINUS: Y_PLUS}
    want = {d * 5 + arrive[ids[d]]: FMT.with_vc(flits[d], 0) for d in dests}
    assert steps[6][1] == want
    assert all(not s[1] for i, s in enumerate(steps) if i != 6)
    # one port: one flit a cycle in, one a cycle out at each node (different nodes: 6..9)
    net = model(CFG)
    offers = [{0: flits[d]} for d in dests]
    steps = _run(net, offers, 11)
    assert [s[0] for s in steps[:4]] == [[0]] * 4
    assert [c for c, s in enumerate(steps) if s[1]] == [6, 7, 8, 9]


@pytest.mark.parametrize("model", MODELS)
def test_two_simultaneous_arrivals_eject_together(model):
    """Node (1, 0) receives from (0, 0) (over its x- link) and from (2, 0) (over x+) in the
    same cycle: under ``per_direction`` both leave in that cycle, at the ejection ports of
    those links; under ``single`` the second waits a cycle for the one ejection port."""
    t = CFG.torus
    a, b, dst = t.node((0, 0)), t.node((2, 0)), t.node((1, 0))
    fa = FMT.head((1, 0), (0, 0), 1, seq=1)
    fb = FMT.head((1, 0), (2, 0), 1, seq=2)
    net = model(CFG, ports="per_direction")
    ia, ib = net.injection_port(a, dst), net.injection_port(b, dst)
    assert (ia, ib) == (a * 5 + X_PLUS, b * 5 + X_MINUS)
    steps = _run(net, [{ia: fa, ib: fb}], 9)
    assert steps[6][1] == {dst * 5 + X_MINUS: fa, dst * 5 + X_PLUS: fb}
    assert all(not s[1] for i, s in enumerate(steps) if i != 6)
    net = model(CFG)
    steps = _run(net, [{a: fa, b: fb}], 9)
    got = [(c, s[1]) for c, s in enumerate(steps) if s[1]]
    assert [c for c, _ in got] == [6, 7]
    assert sorted(f for _, e in got for f in e.values()) == sorted([fa, fb])


@pytest.mark.parametrize("model", MODELS)
def test_single_is_the_rtl_zero_load_timing(model):
    """Under ``single`` (the default) a packet of ``L`` flits over ``H`` hops leaves its tail
    ``3 H + 2 L + 1`` cycles after its head was offered, as before the option existed."""
    t = CFG.torus
    for dst, length in [((2, 3), 1), ((1, 0), 3), ((3, 2), 4)]:
        net = model(CFG)
        flits = FMT.packet(dst, (0, 0), length, 0, range(1, length))
        steps = _run(net, [{0: f} for f in flits], 30)
        out = [c for c, s in enumerate(steps) if t.node(dst) in s[1]]
        assert out[-1] == 3 * t.hops((0, 0), dst) + 2 * length + 1, (dst, length)


def test_bad_ports():
    msg = "ports must be one of single, per_direction (injection and ejection ports per node), "
    for bad in ("double", None, 2):
        for make in (
            lambda p: Ports(CFG, p),
            lambda p: Router(CFG, (0, 0), ports=p),
            lambda p: RouterNetwork(CFG, ports=p),
            lambda p: CompiledNetwork(CFG, ports=p),
        ):
            with pytest.raises(ValueError) as error:
                make(bad)
            assert str(error.value) == msg + f"not {bad!r}"
    with pytest.raises(TypeError, match="cfg must be a LinkConfig, not"):
        Ports((4, 4))
