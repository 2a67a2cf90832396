"""Closed forms of a load study: who sends to whom, zero-load latency, channel-load bound.

:func:`pair_weights` is the share of each source's packets that each destination gets under a
traffic pattern (:mod:`tlm.link.patterns`); :func:`zero_load_latency` is the packet latency
with no contention and :func:`channel_load_bound` the throughput bound of dimension-order
routing (``docs/noc.md``, "Latency and throughput"). :func:`tlm.link.measure.simulate` checks
them against the cycle-exact model. :func:`stream_cycles` is the zero-load time of packets sent
back to back from one node to another (the flit engine's single transfer).
"""

from __future__ import annotations

from itertools import product

import numpy as np

from .config import LinkConfig
from .patterns import HOTSPOT_FRACTION, PATTERNS
from .routing import route

__all__ = ["pair_weights", "zero_load_latency", "channel_load_bound", "stream_cycles"]


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
                w[src] *= 1 - HOTSPOT_FRACTION
                w[src, 0] += HOTSPOT_FRACTION
            elif pattern == "hotspot":
                w[src] *= 1 - HOTSPOT_FRACTION  # node 0 sends nothing in its hot-spot share
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
    first router), averaged over the pattern's pairs.

    Examples
    --------
    >>> float(round(zero_load_latency(LinkConfig((4, 4)), "uniform", length=4), 2))  # H = 32/15
    12.27
    """
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

    Examples
    --------
    >>> b = channel_load_bound(LinkConfig((4, 4)), "uniform")
    >>> float(round(b["max_channel_load"], 2)), float(b["bound"])  # 3/4 * 16/15; injection binds
    (0.8, 1.0)
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


def stream_cycles(hops: int, packet_flits, interval: int = 1) -> int:
    """Cycle in which the last flit of packets sent back to back leaves the ejection register,
    counted from the cycle their first flit was accepted, on an otherwise empty network:
    ``2 H + L1 + 1 + k (F - 1)`` for ``H`` hops, a first packet of ``L1`` flits, ``F`` flits
    in all and ``k`` the largest flit interval on the path (:func:`~tlm.link.config.
    port_intervals`).

    The first flit leaves at ``2 H + L1 + 1`` (the head waits ``L1 - 1`` cycles at injection
    for its tail, then ``2 H + 2`` through the routers); the other ``F - 1`` follow one every
    ``k`` cycles through the slowest link, with no bubble between packets when the injection
    buffer holds two packets (``inject_depth >= 2 L``; with one, each head waits for its
    tail). With ``F = L1 = L``, ``k = 1``: the ``2 H + 2 L`` of ``docs/noc.md``.

    Examples
    --------
    >>> stream_cycles(3, [1])                        # one flit, three hops: 2 H + 2
    8
    >>> stream_cycles(1, [16, 16, 3], interval=2)    # 35 flits over a half-rate link
    87
    """
    flits = [int(f) for f in packet_flits]
    if not flits or min(flits) < 1:
        raise ValueError(f"packet_flits must be one or more packet lengths >= 1, not {flits!r}")
    return 2 * hops + flits[0] + 1 + interval * (sum(flits) - 1)
