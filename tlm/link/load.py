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

__all__ = ["simulate", "zero_load_latency", "channel_load_bound", "pair_weights"]


def pair_weights(cfg: LinkConfig, pattern: str) -> np.ndarray:
    """``w[src, dst]``: the share of ``src``'s packets that go to ``dst`` under ``pattern``."""
    torus = cfg.torus
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


def simulate(
    cfg: LinkConfig,
    pattern: str = "uniform",
    rate: float = 0.3,
    cycles: int = 20000,
    *,
    length: int = 4,
    seed: int = 0,
    warmup: int | None = None,
) -> dict:
    """Run ``pattern`` at ``rate`` flits per node per cycle for ``cycles`` cycles.

    Returns a dict of figures (see the module docstring), with ``links`` giving every
    directed link's utilisation.
    """
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
    warmup = cycles // 10 if warmup is None else warmup
    rng = np.random.default_rng(seed)
    torus = cfg.torus
    n = torus.nodes
    coords = torus.coords()
    dests = Destinations(pattern, torus, rng)
    net = Network(cfg)
    queues = [deque() for _ in range(n)]  # flits waiting at each source
    seq = [0] * n
    seq_mask = (1 << fmt.seq_bits) - 1
    created: dict[tuple[int, int], int] = {}
    latencies = []
    offered = accepted = 0
    p_packet = rate / length
    draws = rng.random((cycles, n)) < p_packet
    data = [0] * (length - 1)
    head_shift = 2 + fmt.vc_bits
    c = n and fmt.dims * fmt.coord_bits
    src_mask = (1 << c) - 1
    seq_shift = head_shift + 2 * c + fmt.len_bits
    in_packet = [None] * n  # (src, seq) of the packet being ejected at each node
    snapshot = None
    for cycle in range(cycles):
        if cycle == warmup:
            snapshot = [list(x) for x in net.link_flits]
        measure = cycle >= warmup
        for src in np.flatnonzero(draws[cycle]):
            src = int(src)
            dst = dests.next(src)
            if dst is None:
                continue
            s = seq[src]
            seq[src] = (s + 1) & seq_mask
            queues[src].extend(fmt.packet(coords[dst], coords[src], length, s, data))
            created[(src, s)] = cycle
            if measure:
                offered += length
        offers = {i: q[0] for i, q in enumerate(queues) if q}
        step = net.step(offers)
        for i in step.accepted:
            queues[i].popleft()
        for node, flit in step.ejected.items():
            kind = flit & 3
            if kind == 0 or kind == 3:
                payload = flit >> head_shift
                key = (
                    torus.node_of_field(payload >> c & src_mask, fmt.coord_bits),
                    (flit >> seq_shift) & seq_mask,
                )
                in_packet[node] = key
            if measure:
                accepted += 1
            if kind >= 2:
                t0 = created.pop(in_packet[node])
                if t0 >= warmup:
                    latencies.append(cycle - t0)
    window = cycles - warmup
    links = []
    for node in range(n):
        for port in range(1, cfg.ports):
            sent = net.link_flits[node][port] - (snapshot[node][port] if snapshot else 0)
            links.append({"node": node, "port": port_name(port), "utilisation": sent / window})
    lat = np.array(latencies, dtype=float)
    util = np.array([x["utilisation"] for x in links])
    return {
        "shape": torus.name,
        "traffic": pattern,
        "rate": rate,
        "length": length,
        "cycles": cycles,
        "warmup": warmup,
        "offered": offered / (n * window),
        "accepted": accepted / (n * window),
        "packets": int(lat.size),
        "latency_mean": float(lat.mean()) if lat.size else None,
        "latency_p99": float(np.percentile(lat, 99)) if lat.size else None,
        "latency_max": int(lat.max()) if lat.size else None,
        "zero_load_latency": float(zero_load_latency(cfg, pattern, length)),
        "link_util_mean": float(util.mean()),
        "link_util_max": float(util.max()),
        "links": links,
    }
