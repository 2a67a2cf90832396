"""tlm.link.network: every packet delivered once, intact, in order; no deadlock above
saturation; zero-load latency as the closed form says."""

from itertools import product

import numpy as np
import pytest

from tlm.link.bounds import stream_cycles
from tlm.link.config import LinkConfig
from tlm.link.network import RouterNetwork
from verif.link.drivers import NodeTraffic
from verif.link.scoreboard import (
    PacketBoard,
    ScoreboardError,
    Watchdog,
    describe_buffers,
    moved,
)
from verif.link.stimulus import random_packets


def drive(cfg, packets, rng, inject="always", eject="always", limit=20000):
    net = RouterNetwork(cfg)
    board = PacketBoard(cfg)
    traffic = NodeTraffic(packets, board, inject, eject, rng)
    dog = Watchdog(200)
    for cycle in range(limit):
        offers, ready = traffic.offers()
        step = net.step(offers, ready)
        for n in step.accepted:
            traffic.accepted(n)
        for n, flit in step.ejected.items():
            board.eject(n, flit, cycle)
        dog.tick(
            moved(step, net.routers),
            board.outstanding,
            cycle,
            lambda: describe_buffers(cfg, net.routers),
        )
        if not traffic.pending and not board.outstanding:
            break
    board.check_done()
    return net, board, cycle


@pytest.mark.parametrize(
    "shape,vcs,depth,inject,eject",
    [
        ((4, 4), 2, 4, "always", "always"),
        ((4, 4), 4, 2, "random", "random"),
        ((3, 5), 2, 1, "always", "1of4"),
        ((4, 4, 4), 2, 4, "always", "3of4"),
    ],
)
def test_random_traffic_delivered_exactly_once_in_order(shape, vcs, depth, inject, eject, seed):
    rng = np.random.default_rng(seed)
    cfg = LinkConfig(shape, vcs=vcs, depth=depth)
    packets = random_packets(cfg, rng, 30, malformed=0.1)
    net, board, _ = drive(cfg, packets, rng, inject, eject)
    assert board.delivered == board.sent > 0
    dropped = sum(p.bad is not None for mine in packets for p in mine)
    # a drop is counted the cycle after it happens (registered, docs/noc.md): one idle
    # cycle after the last packet lets a drop in the drain's last cycle reach its counter
    net.step()
    counted = sum(sum(r.counters) for r in net.routers)
    assert counted == dropped


@pytest.mark.parametrize("pattern", ["uniform", "transpose", "hotspot", "all-to-all"])
def test_above_saturation_no_deadlock(pattern, seed):
    """Every node sends back to back (offered load 1) for thousands of cycles, then drains."""
    rng = np.random.default_rng(seed)
    cfg = LinkConfig((4, 4), depth=2)
    packets = random_packets(cfg, rng, 400, pattern=pattern)
    net, board, cycles = drive(cfg, packets, rng)
    assert cycles > 2000 and board.delivered == board.sent


def test_zero_load_latency_every_pair():
    cfg = LinkConfig((4, 4, 4))
    t = cfg.torus
    for a, b in product(range(t.nodes), repeat=2):
        if a % 7 or b % 5:  # a spread of pairs
            continue
        length = 1 + (a + b) % 4
        net = RouterNetwork(cfg)
        flits = cfg.fmt.packet(t.coord(b), t.coord(a), length, 0, range(1, length))
        out = []
        for c in range(40):
            step = net.step({a: flits[c]} if c < length else {})
            out += [c for n in step.ejected if n == b]
        # three cycles a router (grant, traversal, link), the packet whole at injection
        hops = t.hops(t.coord(a), t.coord(b))
        assert out[-1] == stream_cycles(hops, [length]) == 3 * hops + 2 * length + 1, (a, b)


def test_watchdog_names_where():
    dog = Watchdog(3)
    with pytest.raises(ScoreboardError, match="cycle 2: no flit moved for 3 cycles with 5"):
        for c in range(3):
            dog.tick(False, 5, c, lambda: "stuck here")


def test_watchdog_fires_when_sinks_stop(seed):
    """Sinks that never take a flit stop the traffic: the watchdog fails and names buffers."""
    import itertools

    rng = np.random.default_rng(seed)
    cfg = LinkConfig((4, 4), depth=2)
    packets = random_packets(cfg, rng, 20)
    original = NodeTraffic.__init__

    def stalled(self, *args, **kwargs):
        original(self, *args, **kwargs)
        self._eject = [itertools.repeat(False) for _ in self._eject]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(NodeTraffic, "__init__", stalled)
        with pytest.raises(ScoreboardError, match=r"no flit moved for 200 cycles .* stuck at node"):
            drive(cfg, packets, rng)


@pytest.mark.parametrize("interval", [(1, 1, 1), (1, 1, 2), (1, 1, 3)])
def test_flit_interval_paces_a_dimension(interval):
    """Packets streamed back to back from (0,0,0) to (0,0,1) over a z link of interval ``k``:
    the last flit leaves ``3 H + L + 2 + k (F - 1)`` cycles after the first was accepted
    (the x link to (1,0,0) keeps one flit per cycle)."""
    cfg = LinkConfig((4, 4, 4), len_bits=2)
    torus = cfg.torus
    for dst, k in ((16, interval[2]), (1, interval[0])):
        net = RouterNetwork(cfg, interval)
        flits = [
            f
            for seq in range(3)
            for f in cfg.fmt.packet(torus.coord(dst), (0, 0, 0), 4, seq, [0] * 3)
        ]
        sent, last = 0, None
        for cycle in range(200):
            step = net.step({0: flits[sent]} if sent < len(flits) else {})
            sent += len(step.accepted)
            if step.ejected:
                last = cycle
        assert last == 3 * 1 + 4 + 2 + k * (len(flits) - 1), (dst, k)


def test_flit_interval_bad():
    with pytest.raises(ValueError) as error:
        RouterNetwork(LinkConfig((4, 4, 4)), (1, 2))
    assert str(error.value) == (
        "interval must be 3 integers in 1..64 (cycles per flit on the links of each dimension "
        "of (4, 4, 4)), not (1, 2)"
    )
