"""Synthetic packet sources for a load study, with the bookkeeping of its figures.

:class:`LoadSources` creates every node's packets (Bernoulli, at a load in flits per node per
cycle, destinations from :mod:`tlm.link.patterns`), queues them at their sources, and records
what is offered, what is delivered and each packet's latency; :func:`advance` runs one cycle of
a network driven by them. :func:`tlm.link.measure.simulate` turns them into one load point, on
either engine; the cocotb load bench drives the RTL with them.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from .bounds import zero_load_latency
from .config import LinkConfig
from .network import RouterNetwork
from .patterns import Destinations
from .topology import port_name

__all__ = ["default_warmup", "LoadSources", "advance"]


def default_warmup(cycles: int) -> int:
    """Cycles left out of the figures when no warm-up is given: a tenth of the run."""
    return cycles // 10


class LoadSources:
    """Bernoulli sources at every node, with the bookkeeping of the figures of
    :func:`~tlm.link.measure.simulate`.

    Drives any network with the injection and ejection protocol of
    :class:`~tlm.link.network.RouterNetwork` (the model, or the RTL in a cocotb bench): each cycle
    call :meth:`offers`, then :meth:`accepted` for each node whose flit was taken and
    :meth:`ejected` for each flit that left, then :meth:`end_cycle`.

    Examples
    --------
    >>> cfg = LinkConfig((4, 4))
    >>> sources, net = LoadSources(cfg, "uniform", 0.2, 300, seed=1), RouterNetwork(cfg)
    >>> for _ in range(300):
    ...     advance(net, sources)
    >>> r = sources.result()
    >>> r["packets"] > 0, abs(r["accepted"] - r["offered"]) < 0.05
    (True, True)
    """

    def __init__(self, cfg, pattern, rate, cycles, *, length=4, seed=0, warmup=None):
        if not isinstance(cfg, LinkConfig):
            raise TypeError(f"cfg must be a LinkConfig, not {cfg!r}")
        # bools are ints to Python, but True is no load, cycle count, seed or length here
        if isinstance(rate, bool) or not (isinstance(rate, float | int) and 0 <= rate <= 1):
            raise ValueError(f"rate must be a load in 0..1 flits per node per cycle, not {rate!r}")
        if isinstance(cycles, bool) or not isinstance(cycles, int) or cycles < 1:
            raise ValueError(f"cycles must be a positive integer, not {cycles!r}")
        if warmup is not None and (
            isinstance(warmup, bool) or not isinstance(warmup, int) or not 0 <= warmup < cycles
        ):
            raise ValueError(
                f"warmup must be an integer in 0..cycles - 1 = {cycles - 1} (cycles is"
                f" {cycles}: the figures are measured after the warm-up), not {warmup!r}"
            )
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ValueError(f"seed must be a non-negative integer, not {seed!r}")
        fmt = cfg.fmt
        if (
            isinstance(length, bool)
            or not isinstance(length, int)
            or not (1 <= length <= fmt.max_length)
        ):
            raise ValueError(f"length must be an integer in 1..{fmt.max_length}, not {length!r}")
        self.cfg, self.fmt, self.pattern, self.rate, self.length = cfg, fmt, pattern, rate, length
        self.cycles = cycles
        self.warmup = default_warmup(cycles) if warmup is None else warmup
        rng = np.random.default_rng(seed)
        torus = cfg.torus
        self.torus = torus
        n = self.n = torus.nodes
        self.coords = torus.coords()
        self.dests = Destinations(pattern, torus, rng)
        self.queues = [deque() for _ in range(n)]
        self.seq = [0] * n
        self.seq_mask = (1 << fmt.seq_bits) - 1
        self.created: dict[tuple[int, int], int] = {}
        self.latencies: list[int] = []
        self.offered = self.accepted_flits = 0
        self.draws = rng.random((cycles, n)) < rate / length
        # every packet's creation cycle, source and destination (-1: the pattern sends none),
        # drawn now in the order the cycles would draw them; both engines read these
        self.packet_cycle, self.packet_src = np.nonzero(self.draws)
        self.packet_dst = self.dests.draw(self.packet_src)
        self._first = np.searchsorted(self.packet_cycle, np.arange(cycles + 1))
        self.data = [0] * (length - 1)
        #: (source node, sequence number) of the packet each node is ejecting
        self.in_packet = [None] * n
        self.cycle = 0

    def offers(self) -> dict:
        """Create this cycle's packets; return ``{node: flit}`` offered for injection."""
        cycle, fmt = self.cycle, self.fmt
        lo, hi = self._first[cycle], self._first[cycle + 1]
        for src, dst in zip(
            self.packet_src[lo:hi].tolist(), self.packet_dst[lo:hi].tolist(), strict=True
        ):
            if dst < 0:
                continue
            s = self.seq[src]
            self.seq[src] = (s + 1) & self.seq_mask
            lane = s % self.cfg.lanes  # packets take the lanes in turn
            self.queues[src].extend(
                fmt.packet(self.coords[dst], self.coords[src], self.length, s, self.data, lane)
            )
            self.created[(src, s)] = cycle
            if cycle >= self.warmup:
                self.offered += self.length
        return {i: q[0] for i, q in enumerate(self.queues) if q}

    def accepted(self, node: int):
        self.queues[node].popleft()

    def ejected(self, node: int, flit: int):
        fmt = self.fmt
        kind = fmt.kind(flit)
        if kind.starts_packet:
            src = self.torus.node_of_field(fmt.field(flit, "src"), fmt.coord_bits)
            self.in_packet[node] = (src, fmt.field(flit, "seq"))
        if self.cycle >= self.warmup:
            self.accepted_flits += 1
        if kind.ends_packet:
            t0 = self.created.pop(self.in_packet[node])
            if t0 >= self.warmup:
                self.latencies.append(self.cycle - t0)

    def end_cycle(self):
        self.cycle += 1

    def result(self, link_flits=None) -> dict:
        """The figures; ``link_flits[node][port]`` counts flits sent on each link after the
        warm-up (``links`` is left out without it)."""
        window = self.cycles - self.warmup
        lat = np.array(self.latencies, dtype=float)
        out = {
            "shape": self.torus.name,
            "traffic": self.pattern,
            "rate": self.rate,
            "length": self.length,
            "cycles": self.cycles,
            "warmup": self.warmup,
            "offered": self.offered / (self.n * window),
            "accepted": self.accepted_flits / (self.n * window),
            "packets": int(lat.size),
            "latency_mean": float(lat.mean()) if lat.size else None,
            "latency_p99": float(np.percentile(lat, 99)) if lat.size else None,
            "latency_max": int(lat.max()) if lat.size else None,
            "zero_load_latency": float(zero_load_latency(self.cfg, self.pattern, self.length)),
        }
        if link_flits is not None:
            links = [
                {
                    "node": node,
                    "port": port_name(port),
                    "utilisation": link_flits[node][port] / window,
                }
                for node in range(self.n)
                for port in range(1, self.cfg.ports)
            ]
            util = np.array([x["utilisation"] for x in links])
            out |= {
                "link_util_mean": float(util.mean()),
                "link_util_max": float(util.max()),
                "links": links,
            }
        return out


def advance(net: RouterNetwork, sources: LoadSources):
    """One cycle of ``net`` driven by ``sources``: offer, step, and tell the sources what was
    accepted and what left the network."""
    step = net.step(sources.offers())
    for i in step.accepted:
        sources.accepted(i)
    for node, flit in step.ejected.items():
        sources.ejected(node, flit)
    sources.end_cycle()
