"""Load studies on the network model: offered against accepted load, latency, link use.

:func:`simulate` drives :class:`~tlm.link.network.Network` with synthetic sources
(:mod:`tlm.link.traffic`) and measures, over the cycles after a warm-up:

* offered load: flits created per node per cycle; accepted load: flits delivered per node
  per cycle;
* packet latency: from the cycle a packet is created (queued at its source) to the cycle its
  tail leaves the ejection port, for packets created after the warm-up and delivered by the end;
* link utilisation: flits sent per cycle on each directed link.

:func:`zero_load_latency` is the closed form of the same latency with no contention and
:func:`channel_load_bound` the throughput bound of dimension-order routing (``docs/noc.md``).
"""

from __future__ import annotations

from collections import deque
from itertools import product

import numpy as np

from .config import LinkConfig
from .network import Network
from .routing import route
from .topology import port_name
from .traffic import PATTERNS, Destinations

__all__ = [
    "simulate",
    "advance",
    "LoadSources",
    "zero_load_latency",
    "channel_load_bound",
    "pair_weights",
    "ENGINES",
]

#: Engines of :func:`simulate`: ``fast``, the compiled network (:mod:`tlm.link.fast`), and
#: ``python``, the per-router reference model (:class:`~tlm.link.network.Network`). Both give
#: the same figures to the last bit.
ENGINES = ("fast", "python")


def pair_weights(cfg: LinkConfig, pattern: str) -> np.ndarray:
    """``w[src, dst]``: the share of ``src``'s packets that go to ``dst`` under ``pattern``."""
    torus = cfg.torus
    if pattern == "transpose" and torus.shape != torus.shape[::-1]:
        raise ValueError(f"transpose needs a symmetric shape, not {torus.shape!r}")
    n = torus.nodes
    w = np.zeros((n, n))
    for src in range(n):
        if pattern in ("uniform", "all-to-all", "hotspot"):
            w[src] = 1 / (n - 1)
            w[src, src] = 0
            if pattern == "hotspot" and src != 0:
                from .traffic import HOTSPOT_FRACTION as f

                w[src] *= 1 - f
                w[src, 0] += f
            elif pattern == "hotspot":
                w[src] *= 1 - 0.2  # node 0 sends nothing in its hot-spot share
        elif pattern == "transpose":
            dst = torus.node(torus.coord(src)[::-1])
            if dst != src:
                w[src, dst] = 1
        elif pattern == "neighbour":
            for port in range(1, cfg.ports):
                w[src, torus.node(torus.neighbour(torus.coord(src), port))] += 1 / (cfg.ports - 1)
        else:
            raise ValueError(f"pattern must be one of {', '.join(PATTERNS)}, not {pattern!r}")
    return w


def zero_load_latency(cfg: LinkConfig, pattern: str = "uniform", length: int = 1) -> float:
    """Mean packet latency without contention: ``2 H + 2 L`` cycles for ``H`` hops and
    ``L`` flits (two cycles per router; the packet is injected whole before it leaves its
    first router), averaged over the pattern's pairs."""
    torus = cfg.torus
    w = pair_weights(cfg, pattern)
    hops = np.array([[torus.hops(a, b) for b in torus.coords()] for a in torus.coords()])
    sending = w.sum(axis=1) > 0
    mean_h = (w * hops).sum() / sending.sum()
    return 2 * mean_h + 2 * length


def channel_load_bound(cfg: LinkConfig, pattern: str = "uniform") -> dict:
    """Throughput bound of dimension-order routing: the load (flits per cycle) of the busiest
    channel when every node offers one flit per cycle, and what it allows.

    Returns ``{"max_channel_load": g, "bound": min(1, 1 / g, 1 / max ejection load)}`` in
    flits per node per cycle; injection and ejection carry one flit per cycle.
    """
    torus = cfg.torus
    w = pair_weights(cfg, pattern)
    load: dict[tuple[int, int], float] = {}
    coords = torus.coords()
    for s, d in product(range(torus.nodes), repeat=2):
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
    g = max(load.values(), default=0.0)
    eject = w.sum(axis=0).max()
    limits = [1.0] + ([1 / g] if g else []) + ([1 / eject] if eject else [])
    return {"max_channel_load": g, "max_eject_load": eject, "bound": min(limits)}


class LoadSources:
    """Bernoulli sources at every node, with the bookkeeping of :func:`simulate`'s figures.

    Drives any network with the injection and ejection protocol of
    :class:`~tlm.link.network.Network` (the model, or the RTL in a cocotb bench): each cycle
    call :meth:`offers`, then :meth:`accepted` for each node whose flit was taken and
    :meth:`ejected` for each flit that left, then :meth:`end_cycle`.
    """

    def __init__(self, cfg, pattern, rate, cycles, *, length=4, seed=0, warmup=None):
        if not isinstance(cfg, LinkConfig):
            raise TypeError(f"cfg must be a LinkConfig, not {cfg!r}")
        if not (isinstance(rate, float | int) and 0 <= rate <= 1):
            raise ValueError(f"rate must be a load in 0..1 flits per node per cycle, not {rate!r}")
        if isinstance(cycles, bool) or not isinstance(cycles, int) or cycles < 1:
            raise ValueError(f"cycles must be a positive integer, not {cycles!r}")
        fmt = cfg.fmt
        if isinstance(length, bool) or not isinstance(length, int):
            length = -1
        if not 1 <= length <= fmt.max_length:
            raise ValueError(f"length must be an integer in 1..{fmt.max_length}, not {length!r}")
        self.cfg, self.fmt, self.pattern, self.rate, self.length = cfg, fmt, pattern, rate, length
        self.cycles = cycles
        self.warmup = cycles // 10 if warmup is None else warmup
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
        self.head_shift = 2 + fmt.vc_bits
        self.c = fmt.dims * fmt.coord_bits
        self.src_mask = (1 << self.c) - 1
        self.seq_shift = self.head_shift + 2 * self.c + fmt.len_bits
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
        kind = flit & 3
        if kind == 0 or kind == 3:
            payload = flit >> self.head_shift
            src = self.torus.node_of_field(payload >> self.c & self.src_mask, self.fmt.coord_bits)
            self.in_packet[node] = (src, (flit >> self.seq_shift) & self.seq_mask)
        if self.cycle >= self.warmup:
            self.accepted_flits += 1
        if kind >= 2:
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


def advance(net: Network, sources: LoadSources):
    """One cycle of ``net`` driven by ``sources``: offer, step, and tell the sources what was
    accepted and what left the network."""
    step = net.step(sources.offers())
    for i in step.accepted:
        sources.accepted(i)
    for node, flit in step.ejected.items():
        sources.ejected(node, flit)
    sources.end_cycle()


def simulate(
    cfg: LinkConfig,
    pattern: str = "uniform",
    rate: float = 0.3,
    cycles: int = 20000,
    *,
    length: int = 4,
    seed: int = 0,
    warmup: int | None = None,
    engine: str = "fast",
) -> dict:
    """Run ``pattern`` at ``rate`` flits per node per cycle for ``cycles`` cycles on the
    model, with :class:`LoadSources`.

    ``engine`` is one of :data:`ENGINES`: ``"fast"`` runs the whole study compiled
    (:func:`tlm.link.fast.run_load`), ``"python"`` steps :class:`~tlm.link.network.Network`
    from Python; the figures are identical.

    Returns a dict of figures (see the module docstring), with ``links`` giving every
    directed link's utilisation.

    Examples
    --------
    >>> cfg = LinkConfig((4, 4))
    >>> fast = simulate(cfg, rate=0.2, cycles=500)
    >>> fast == simulate(cfg, rate=0.2, cycles=500, engine="python")
    True
    """
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {', '.join(ENGINES)}, not {engine!r}")
    sources = LoadSources(cfg, pattern, rate, cycles, length=length, seed=seed, warmup=warmup)
    if engine == "fast":
        from .fast import run_load  # numba loads only when asked for

        return run_load(sources)
    net = Network(cfg)
    snapshot = None
    for cycle in range(cycles):
        if cycle == sources.warmup:
            snapshot = [list(x) for x in net.link_flits]
        advance(net, sources)
    if snapshot is None:
        snapshot = [[0] * cfg.ports for _ in range(cfg.torus.nodes)]
    sent = [
        [a - b for a, b in zip(now, before, strict=True)]
        for now, before in zip(net.link_flits, snapshot, strict=True)
    ]
    return sources.result(sent)
