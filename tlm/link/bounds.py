"""Closed forms of a load study: who sends to whom, zero-load latency, channel-load bound.

:func:`pair_weights` is the share of each source's packets that each destination gets under a
traffic pattern (:mod:`tlm.link.patterns`); :func:`zero_load_latency` is the packet latency
with no contention and :func:`channel_load_bound` the throughput bound of dimension-order
routing (``docs/noc.md``, "Latency and throughput"). :func:`tlm.link.measure.simulate` checks
them against the cycle-exact model. :func:`stream_cycles` is the zero-load time of packets sent
back to back from one node to another (the flit engine's single transfer).
"""

from __future__ import annotations

import numpy as np

from .config import LinkConfig
from .patterns import HOTSPOT_FRACTION, PATTERNS

__all__ = ["traffic", "pair_weights", "zero_load_latency", "channel_load_bound", "stream_cycles"]


def _coords(torus) -> np.ndarray:
    """Every node's coordinate, in node order: an array of shape (nodes, dims)."""
    left, out = np.arange(torus.nodes), []
    for k in torus.shape:
        left, c = np.divmod(left, k)
        out.append(c)
    return np.stack(out, axis=1)


def _node(torus, coords: np.ndarray) -> np.ndarray:
    """The node numbers of coordinates (an array of shape (..., dims)), wrapped round."""
    coords = np.asarray(coords) % np.asarray(torus.shape)
    n = np.zeros(coords.shape[:-1], dtype=np.int64)
    for d in reversed(range(torus.dims)):
        n = n * torus.shape[d] + coords[..., d]
    return n


def traffic(cfg: LinkConfig, pattern: str):
    """A pattern as the share every node sends over each displacement (``share[node(shift)]``,
    the same from every source) plus pairs of its own (``src``, ``dst``, ``weight`` arrays):
    never an N x N matrix, so a 65,536-node torus takes a few megabytes."""
    torus = cfg.torus
    if pattern == "transpose" and torus.shape != torus.shape[::-1]:
        raise ValueError(f"transpose needs a symmetric shape, not {torus.shape!r}")
    if pattern not in PATTERNS:
        raise ValueError(f"pattern must be one of {', '.join(PATTERNS)}, not {pattern!r}")
    n = torus.nodes
    share = np.zeros(n)
    none = np.zeros(0, dtype=np.int64)
    src, dst, weight = none, none, np.zeros(0)
    if pattern in ("uniform", "all-to-all", "hotspot"):
        share[1:] = 1 / (n - 1)
        if pattern == "hotspot":  # node 0 sends nothing in its own hot-spot share
            share *= 1 - HOTSPOT_FRACTION
            src = np.arange(1, n)
            dst, weight = np.zeros(n - 1, dtype=np.int64), np.full(n - 1, HOTSPOT_FRACTION)
    elif pattern == "neighbour":  # one share per link port
        origin = tuple(0 for _ in torus.shape)
        for port in range(1, cfg.ports):
            share[torus.node(torus.neighbour(origin, port))] += 1 / (cfg.ports - 1)
    else:  # transpose
        every = np.arange(n)
        to = _node(torus, _coords(torus)[:, ::-1])
        src, dst = every[to != every], to[to != every]
        weight = np.ones(len(src))
    return share, (src, dst, weight)


def pair_weights(cfg: LinkConfig, pattern: str) -> np.ndarray:
    """``w[src, dst]``: the share of ``src``'s packets that go to ``dst`` under ``pattern``
    (an N x N matrix, for the small tori the simulator's sources and the tests read)."""
    share, (src, dst, weight) = traffic(cfg, pattern)
    torus = cfg.torus
    coords = _coords(torus)
    every = np.arange(torus.nodes)
    w = np.zeros((torus.nodes, torus.nodes))
    for i in np.flatnonzero(share):
        w[every, _node(torus, coords + coords[i])] += share[i]
    np.add.at(w, (src, dst), weight)
    return w


def _hop_counts(torus, shifts: np.ndarray) -> np.ndarray:
    """Hops dimension-order routing takes over each displacement (rows of ``shifts``)."""
    k = np.asarray(torus.shape)
    d = np.asarray(shifts) % k
    return np.minimum(d, k - d).sum(axis=-1)


def zero_load_latency(cfg: LinkConfig, pattern: str = "uniform", length: int = 1) -> float:
    """Mean packet latency without contention: ``3 H + 2 L + 1`` cycles for ``H`` hops and
    ``L`` flits (three cycles per router, grant then traversal: a head alone leaves
    ``3 H + 3`` cycles after it was accepted; the packet is injected whole before it leaves
    its first router, ``L - 1`` cycles, and its tail leaves ``L - 1`` cycles after its head),
    averaged over the pattern's pairs.

    Examples
    --------
    >>> float(round(zero_load_latency(LinkConfig((4, 4)), "uniform", length=4), 2))  # H = 32/15
    15.4
    """
    torus = cfg.torus
    share, (src, dst, weight) = traffic(cfg, pattern)
    coords = _coords(torus)
    total = torus.nodes * float((share * _hop_counts(torus, coords)).sum())
    total += float((weight * _hop_counts(torus, coords[dst] - coords[src])).sum())
    senders = torus.nodes if share.any() else len(np.unique(src))
    return 3 * total / senders + 2 * length + 1


def _moves(torus, shifts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per displacement (rows of ``shifts``) and dimension, the hops dimension-order routing
    takes and whether it goes + (:func:`route`: x first, the shorter way round, + at exactly
    half way)."""
    k = np.asarray(torus.shape)
    delta = np.asarray(shifts) % k
    plus = 2 * delta <= k
    return np.where(plus, delta, k - delta), plus


def _invariant_load(torus, ports: int, share: np.ndarray) -> np.ndarray:
    """Each port's channel load when every node sends ``share[node(shift)]`` of its flits
    over each displacement ``shift``: the same at every node (a packet crossing ``h`` hops
    of a port's direction loads ``h`` channels of that port)."""
    steps, plus = _moves(torus, _coords(torus))
    per_port = np.zeros(ports)
    for d in range(torus.dims):
        carried = share * steps[:, d]
        per_port[1 + 2 * d] = carried[plus[:, d]].sum()
        per_port[2 + 2 * d] = carried[~plus[:, d]].sum()
    return np.broadcast_to(per_port, (torus.nodes, ports)).copy()


def _pairs_load(torus, ports: int, pairs) -> np.ndarray:
    """Channel loads of a pattern's own pairs (``src``, ``dst``, ``weight``), every pair a
    hop at a time, all of them at once."""
    src, dst, weight = pairs
    coords = _coords(torus)
    load = np.zeros((torus.nodes, ports))
    here = coords[src].copy()
    steps, plus = _moves(torus, coords[dst] - coords[src])
    for d, k in enumerate(torus.shape):
        for hop in range(int(steps[:, d].max(initial=0))):
            on = steps[:, d] > hop
            go = plus[on, d]
            np.add.at(load, (_node(torus, here[on]), np.where(go, 1, 2) + 2 * d), weight[on])
            here[on, d] = (here[on, d] + np.where(go, 1, -1)) % k
    return load


def channel_load_bound(cfg: LinkConfig, pattern: str = "uniform") -> dict:
    """Throughput bound of dimension-order routing: the load (flits per cycle) of the busiest
    channel when every node offers one flit per cycle, and what it allows.

    Returns ``{"max_channel_load": g, "bound": min(1, 1 / g, 1 / max ejection load)}`` in
    flits per node per cycle; injection and ejection carry one flit per cycle. Loads add up
    over the pattern's parts: the part every node sends alike (uniform, neighbour, most of
    hotspot) is summed per displacement, the rest (transpose, the hot spot's share) a
    hop at a time for all its pairs together - no N x N matrix, no route per pair.

    Examples
    --------
    >>> b = channel_load_bound(LinkConfig((4, 4)), "uniform")
    >>> float(round(b["max_channel_load"], 2)), float(b["bound"])  # 3/4 * 16/15; injection binds
    (0.8, 1.0)
    """
    torus = cfg.torus
    share, pairs = traffic(cfg, pattern)
    load = _invariant_load(torus, cfg.ports, share) + _pairs_load(torus, cfg.ports, pairs)
    g = float(load.max())
    _src, dst, weight = pairs
    eject = float(share.sum() + np.bincount(dst, weight, minlength=torus.nodes).max())
    limits = [1.0] + ([1 / g] if g else []) + ([1 / eject] if eject else [])
    return {"max_channel_load": g, "max_eject_load": eject, "bound": min(limits)}


def stream_cycles(hops: int, packet_flits, interval: int = 1) -> int:
    """Cycle in which the last flit of packets sent back to back leaves the ejection register,
    counted from the cycle their first flit was accepted, on an otherwise empty network:
    ``3 H + L1 + 2 + k (F - 1)`` for ``H`` hops, a first packet of ``L1`` flits, ``F`` flits
    in all and ``k`` the largest flit interval on the path (:func:`~tlm.link.config.
    port_intervals`).

    The first flit leaves at ``3 H + L1 + 2`` (the head waits ``L1 - 1`` cycles at injection
    for its tail, then ``3 H + 3`` through the routers: grant, then traversal, then the
    link); the other ``F - 1`` follow one every ``k`` cycles through the slowest link, with
    no bubble between packets when the injection buffer holds two packets
    (``inject_depth >= 2 L``; with one, each head waits for its tail). With ``F = L1 = L``,
    ``k = 1``: the ``3 H + 2 L + 1`` of ``docs/noc.md``.

    Examples
    --------
    >>> stream_cycles(3, [1])                        # one flit, three hops: 3 H + 3
    12
    >>> stream_cycles(1, [16, 16, 3], interval=2)    # 35 flits over a half-rate link
    89
    """
    flits = [int(f) for f in packet_flits]
    if not flits or min(flits) < 1:
        raise ValueError(f"packet_flits must be one or more packet lengths >= 1, not {flits!r}")
    return 3 * hops + flits[0] + 2 + interval * (sum(flits) - 1)
