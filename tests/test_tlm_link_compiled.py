"""tlm.link.compiled: the compiled network equals tlm.link.network register for register, and a
compiled load study gives the figures of the Python one to the last bit.

The kernels compile once per environment (about 10 s, then cached on disk by numba)."""

import numpy as np
import pytest

from tlm.link.compiled import CompiledNetwork
from tlm.link.config import MALFORMED, DropKind, LinkConfig
from tlm.link.flit import FlitKind
from tlm.link.measure import simulate
from tlm.link.network import RouterNetwork
from tlm.link.patterns import PATTERNS
from verif.link.drivers import NodeTraffic
from verif.link.scoreboard import PacketBoard
from verif.link.stimulus import TWIN_CASES, Packet, credit_faults, random_packets


@pytest.mark.parametrize("shape,vcs,depth,inject,eject", TWIN_CASES)
def test_fast_equals_network(shape, vcs, depth, inject, eject, seed):
    counts = check_fast(LinkConfig(shape, vcs=vcs, depth=depth), inject, eject, seed)
    assert all(counts[kind] > 0 for kind in MALFORMED), counts  # every malformed kind dropped
    assert counts[DropKind.NO_CREDIT] == counts[DropKind.CREDIT_OVERFLOW] == 0, counts


@pytest.mark.parametrize("shape,vcs,depth,inject,eject", TWIN_CASES)
def test_fast_equals_network_under_link_misuse(shape, vcs, depth, inject, eject, seed):
    """Broken senders too (``credit_faults``): their neighbours see flits without credit, they
    see credits they are not owed; both models drop, close and count alike and still drain."""
    cfg = LinkConfig(shape, vcs=vcs, depth=depth)
    counts = check_fast(cfg, inject, eject, seed, misuse=True)
    assert all(counts[kind] > 0 for kind in DropKind), counts  # every kind was dropped


@pytest.mark.parametrize(
    "shape,vcs,depth,interval", [((4, 4, 4), 2, 4, (1, 1, 2)), ((3, 5), 4, 1, (3, 2))]
)
def test_fast_equals_network_with_flit_interval(shape, vcs, depth, interval, seed):
    """The TLM-only flit interval (links of a dimension sending every ``k`` cycles): the two
    models agree register for register, interval counters included, and deliver every packet."""
    cfg = LinkConfig(shape, vcs=vcs, depth=depth)
    check_fast(cfg, "always", "random", seed, interval=interval)


@pytest.mark.parametrize(
    "shape,vcs,depth,interval,inject,eject",
    [
        ((4, 4), 2, 4, None, "always", "always"),
        ((4, 4, 4), 2, 4, (1, 1, 2), "always", "random"),
        ((3, 5), 4, 1, None, "random", "1of2"),
    ],
)
def test_fast_equals_network_with_a_port_per_direction(
    shape, vcs, depth, interval, inject, eject, seed
):
    """``ports="per_direction"``: each node's packets queued at the injection port of their
    first hop, malformed ones at random ports, each ejection port with its own backpressure:
    the two models agree register for register, drop alike and deliver every packet."""
    cfg = LinkConfig(shape, vcs=vcs, depth=depth)
    counts = check_fast(cfg, inject, eject, seed, interval=interval, ports="per_direction")
    assert all(counts[kind] > 0 for kind in MALFORMED), counts


def check_fast(cfg, inject, eject, seed, misuse=False, interval=None, ports="single"):
    """Step ``RouterNetwork`` and ``CompiledNetwork`` side by side on the same random traffic
    (malformed packets, packets cut short, malformed flits from a broken neighbour on the links,
    ejection backpressure), comparing every register every cycle until both drain; with ``misuse``,
    some senders are broken (``credit_faults``) in both. Without it, every well-formed packet
    must arrive intact (with it, packets through a broken link arrive truncated or not at all,
    as they should: the per-router model's tests hold those rules). Under ``ports``
    ``"per_direction"`` each packet waits at its injection port (a malformed one at the next
    good packet's) and each ejection port has its own ``ready``. Returns the drop counts,
    summed over the routers."""
    rng = np.random.default_rng(seed)
    packets = random_packets(cfg, rng, 25, malformed=0.15)
    for src, mine in enumerate(packets):  # and packets cut short by the next (good) head
        good = [i for i, p in enumerate(mine) if p.bad is None]
        for i in sorted(rng.choice(good, size=min(2, len(good)), replace=False), reverse=True):
            mine.insert(int(i), _cut_short(cfg, rng, src))
    faults = credit_faults(cfg, rng) if misuse else None
    net, fast = RouterNetwork(cfg, interval, ports), CompiledNetwork(cfg, interval, ports)
    count = net.port_count
    if count > 1:  # each node's packets, in order, by the injection port they enter at
        by_port = [[] for _ in range(cfg.torus.nodes * count)]
        for src, mine in enumerate(packets):
            # a malformed packet goes where the next good one does, as in the single port's
            # stream: a packet cut short is cut by a good head, not closed by a stray tail
            port = src * count
            for p in reversed(mine):
                if p.bad is None:
                    port = net.injection_port(src, p.dst)
                by_port[port].insert(0, p)
        packets = by_port
    traffic = NodeTraffic(packets, PacketBoard(cfg), inject, eject, rng)
    arriving = {}  # ejection port id -> flits of the packet it is ejecting
    for cycle in range(3000):
        if faults and cycle == faults.cycle:
            for node, o, v in faults.sites:
                net.routers[node].credits[o][v] += faults.extra
                fast.state.cred[node, o, v] += faults.extra
        if rng.random() < 0.05:
            _link_fault(cfg, rng, net, fast)
        offer, ready = traffic.offers()
        want = net.step(offer, ready)
        got = fast.step(offer, ready)
        assert got.accepted == sorted(want.accepted), cycle
        assert got.ejected == want.ejected, cycle
        for i in want.accepted:
            traffic.accepted(i)
        if not misuse:
            for port, flit in want.ejected.items():
                # a node's ejection ports interleave packets: the board takes each one whole
                arriving.setdefault(port, []).append(flit)
                if cfg.fmt.kind(flit).ends_packet:
                    for f in arriving.pop(port):
                        traffic.board.eject(port // count, f, cycle)
        for node, r in enumerate(net.routers):
            where = (cycle, node)
            assert fast.link_reg(node) == tuple(r.link_reg), where
            assert fast.credit_reg(node) == tuple(r.credit_reg), where
            assert fast.counters(node) == r.counters, where
            assert fast.state.drop_reg[node].tolist() == list(r.drop_reg), where
            for i in range(count):
                assert fast.eject_reg(node * count + i) == r.eject_regs[i], where
                assert fast.inject_ready(node * count + i) == r.inject_ready_at(i), where
            assert fast.state.cred[node].tolist() == r.credits, where
            assert fast.state.rr[node].tolist() == r.rr, where
            assert fast.state.wait[node].tolist() == r.wait, where
        assert fast.idle == net.idle, cycle
        if cycle > 50 and not traffic.pending and net.idle:
            break
    assert cycle < 2999
    if not misuse:
        traffic.board.check_done()
    assert fast.state.link_flits.tolist() == net.link_flits
    return np.sum([r.counters for r in net.routers], axis=0)


def _cut_short(cfg, rng, src) -> Packet:
    """The head and first body flit of a 3-flit packet (the next head finds it open)."""
    fmt, torus = cfg.fmt, cfg.torus
    dst = torus.coord(int(rng.integers(torus.nodes)))
    flits = fmt.packet(dst, torus.coord(src), 3, 0, [7, 8])[:2]
    return Packet(src, None, 0, 0, flits, DropKind.BAD_LENGTH)


def _link_fault(cfg, rng, net, fast):
    """A broken neighbour: an orphan body or tail, or a head for outside the torus, on a
    random link into an idle VC, in both models (its sender's credit taken as if it sent it)."""
    fmt, torus = cfg.fmt, cfg.torus
    node, port = int(rng.integers(torus.nodes)), int(rng.integers(1, cfg.ports))
    vc = int(rng.integers(cfg.vcs))
    peer, facing = int(fast.consts.peer_node[node, port]), int(fast.consts.peer_port[port])
    r = cfg.requester(port, vc)
    upstream, here = net.routers[peer], net.routers[node]
    if upstream.link_reg[facing] is not None or upstream.credits[facing][vc] == 0:
        return
    if here.fifo[r] or here.alloc[r] is not None:
        return
    if rng.random() < 0.5:
        flit = fmt.body(int(rng.integers(1 << 20)), vc=vc, tail=bool(rng.integers(2)))
    else:
        dst = list(torus.coord(int(rng.integers(torus.nodes))))
        dst[0] = cfg.shape[0]
        flit = fmt.head(tuple(dst), torus.coord(peer), 2, 0, vc=vc)
    if net._link_in[node] is None:
        net._link_in[node] = [None] * cfg.ports
    net._link_in[node][port] = flit
    upstream.credits[facing][vc] -= 1
    fast.state.lval[peer, facing], fast.state.lreg[peer, facing] = True, flit
    fast.state.cred[peer, facing, vc] -= 1


def _fifo(fast, node, r):
    """The flits in requester ``r``'s FIFO at ``node``, oldest first."""
    s, depth = fast.state, fast.cfg.depth
    return [int(s.buf[node, r, (s.qhead[node, r] + i) % depth]) for i in range(s.qcnt[node, r])]


@pytest.mark.parametrize(
    "last,closed",
    [
        (FlitKind.HEAD, FlitKind.SINGLE),
        (FlitKind.BODY, FlitKind.TAIL),
        (FlitKind.TAIL, None),  # the packet ended: kept as it is
        (FlitKind.SINGLE, None),
    ],
)
def test_flit_without_credit_is_dropped_and_counted(last, closed):
    """A flit into a full FIFO (nothing read from it this cycle) is dropped and counted, no
    credit goes back for it, and the FIFO's last flit, if it leaves its packet open, ends it
    (as tests/test_tlm_link_router.py holds the per-router model to)."""
    cfg = LinkConfig((4, 4), depth=4)
    fmt, fast = cfg.fmt, CompiledNetwork(cfg)
    s = fast.state
    node, port = 5, 1  # node 5 is (1, 1); its x+ input VC 0 is requester 1
    if last in (FlitKind.HEAD, FlitKind.SINGLE):  # a packet ends, the next one begins
        end = fmt.head((0, 0), (2, 1), 2, 7, single=last == FlitKind.SINGLE)
        flits = [fmt.body(1), fmt.body(2), fmt.body(3, tail=True), end]
    else:
        flits = [fmt.body(1), fmt.body(2), fmt.body(3), fmt.body(4, tail=last == FlitKind.TAIL)]
    for i, flit in enumerate(flits):
        s.buf[node, 1, i] = flit
    s.qcnt[node, 1] = cfg.depth  # full, and its packet in progress waits for a y+ credit
    s.alloc_port[node, 1] = 3
    s.cred[node, 3] = 0
    peer, facing = fast.consts.peer_node[node, port], fast.consts.peer_port[port]
    s.lval[peer, facing], s.lreg[peer, facing] = True, fmt.body(99, tail=True)
    fast.step()
    counts = [0] * len(DropKind)
    counts[DropKind.NO_CREDIT] = 1
    assert fast.counters(node) == [0] * len(DropKind)  # registered: counted next cycle
    assert s.drop_reg[node].tolist() == counts
    assert fast.credit_reg(node)[port] == 0  # none for the dropped flit
    want = flits[-1] if closed is None else fmt.with_kind(flits[-1], closed)
    assert _fifo(fast, node, 1) == flits[:-1] + [want]
    fast.step()
    assert fast.counters(node) == counts


def test_credit_not_owed_is_ignored_and_counted():
    """A credit for a VC that holds every credit is ignored and counted; one that is owed
    counts as a credit."""
    cfg = LinkConfig((4, 4), vcs=2, depth=2)
    fast = CompiledNetwork(cfg)
    s = fast.state
    node, port = 5, 1
    s.cred[node, port, 1] = cfg.depth - 1  # one flit of VC 1 is owed
    peer, facing = fast.consts.peer_node[node, port], fast.consts.peer_port[port]
    s.creg[peer, facing] = 0b11  # a credit for each VC
    fast.step()
    counts = [0] * len(DropKind)
    counts[DropKind.CREDIT_OVERFLOW] = 1
    assert fast.counters(node) == [0] * len(DropKind) and not fast.idle  # counted next cycle
    assert s.cred[node, port].tolist() == [cfg.depth, cfg.depth]
    fast.step()
    assert fast.counters(node) == counts and fast.idle


@pytest.mark.parametrize("engine", [RouterNetwork, CompiledNetwork])
def test_drop_is_counted_by_the_step_that_accepts_its_last_flit(engine):
    """Node 42's malformed packets of the 4x4x4 bench run with seed 1946910119: a head whose
    length says 1 then a body and a tail, and a length-2 head then three bodies and a tail.
    Each is dropped once, as BAD_LENGTH, by the step that accepts its tail: the drop is
    registered then and the counter shows it one cycle later, from the step after that on,
    never before (the RTL bench once read the RTL's counters a cycle early and so missed a
    drop in the run's last cycle)."""
    cfg = LinkConfig((4, 4, 4))
    fmt, here, node = cfg.fmt, (2, 2, 2), 42
    assert cfg.torus.node(here) == node
    packets = [
        [fmt.head((1, 0, 3), here, 1, 0, single=False), fmt.body(1), fmt.body(2, tail=True)],
        [fmt.head((0, 3, 1), here, 2, 1), *[fmt.body(i) for i in (1, 2, 3)]]
        + [fmt.body(4, tail=True)],
    ]
    net = engine(cfg)

    def counters():
        if engine is RouterNetwork:
            return list(net.routers[node].counters)
        return net.counters(node)

    counted = [0] * len(DropKind)
    due = False  # a drop registered by the last step, counted by the next
    for flits in packets:
        for i, flit in enumerate(flits):
            assert counters() == counted
            net.step()  # a cycle between flits, as a source that idles
            counted[DropKind.BAD_LENGTH] += due
            assert counters() == counted, (flits, i)
            assert list(net.step({node: flit}).accepted) == [node]
            assert counters() == counted, (flits, i)
            due = i == len(flits) - 1
    net.step()
    counted[DropKind.BAD_LENGTH] += due
    assert counters() == counted and counted[DropKind.BAD_LENGTH] == 2
    for _ in range(5):  # the injection buffer was rolled back: nothing is left to send
        net.step()
        assert counters() == counted
    assert net.idle


def test_bad_arguments():
    with pytest.raises(ValueError) as error:
        CompiledNetwork(LinkConfig((4, 4), width=96))
    assert str(error.value) == "width must be at most 64 bits for the compiled engine, not 96"
    with pytest.raises(TypeError) as error:
        CompiledNetwork((4, 4))
    assert str(error.value) == "cfg must be a LinkConfig, not (4, 4)"
    with pytest.raises(ValueError) as error:
        simulate(LinkConfig((4, 4)), cycles=10, engine="numba")
    assert str(error.value) == "engine must be one of compiled, python, not 'numba'"


def _check_engines_agree(cfg, pattern, rate, cycles, seed, **kwargs):
    fast = simulate(cfg, pattern, rate, cycles, seed=seed, **kwargs)
    python = simulate(cfg, pattern, rate, cycles, seed=seed, engine="python", **kwargs)
    assert fast == python
    assert fast["packets"] > 0


@pytest.mark.parametrize("pattern", PATTERNS)
@pytest.mark.parametrize("shape,rate,cycles", [((4, 4), 0.4, 1500), ((4, 4, 4), 0.3, 400)])
def test_simulate_engines_agree(pattern, shape, rate, cycles, seed):
    _check_engines_agree(LinkConfig(shape), pattern, rate, cycles, seed)


@pytest.mark.parametrize(
    "shape,vcs,depth,pattern,rate,length,warmup",
    [
        ((4, 4), 2, 4, "uniform", 1.0, 4, None),  # above saturation: source queues grow
        ((4, 4), 4, 2, "hotspot", 0.5, 1, 100),
        ((3, 5), 4, 1, "neighbour", 0.6, 3, 0),
    ],
)
def test_simulate_engines_agree_configs(shape, vcs, depth, pattern, rate, length, warmup, seed):
    cfg = LinkConfig(shape, vcs=vcs, depth=depth)
    _check_engines_agree(cfg, pattern, rate, 1000, seed, length=length, warmup=warmup)


@pytest.mark.parametrize("shape", [(4, 4), (3, 5), (4, 4, 4), (2, 2, 2), (6,), (3, 3, 3, 2)])
def test_route_table_is_route_at_every_router(shape):
    """The table filled per displacement is :func:`route`'s port at every router for every
    destination (it asked route for all N x N pairs, minutes at 2,048 nodes)."""
    from tlm.link.compiled import route_table
    from tlm.link.routing import route

    cfg = LinkConfig(shape)
    coords = cfg.torus.coords()
    table = route_table(cfg)
    want = [[route(shape, here, coords[0], dst)[0] for dst in coords] for here in coords]
    assert table.tolist() == want and table.nbytes == cfg.torus.nodes**2  # a byte each
