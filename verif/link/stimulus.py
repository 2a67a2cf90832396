"""Seeded random packets for the router and network benches.

Each node gets a list of packets (``Packet``): destination from a traffic pattern, random
length, lane and data; with ``malformed`` some are deliberately broken in each of the ways the
router must drop (:data:`~tlm.link.config.MALFORMED`). ``credit_faults`` breaks senders instead:
routers that believe they hold more credits than they do, the link misuse the other two
:class:`~tlm.link.config.DropKind` members count.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tlm.link.config import MALFORMED, DropKind, LinkConfig
from tlm.link.patterns import Destinations

__all__ = [
    "Packet",
    "random_packets",
    "malformed_packet",
    "CreditFaults",
    "credit_faults",
    "TWIN_CASES",
]

#: ``(shape, vcs, depth, inject pattern, eject pattern)`` of the runs that hold each twin of
#: the network model (the vectorised and the compiled one) against the per-router model.
TWIN_CASES = [
    ((4, 4), 2, 4, "always", "random"),
    ((3, 5), 4, 1, "random", "3of4"),
    ((4, 4, 4), 2, 2, "always", "always"),
    ((2, 3), 2, 4, "1of2", "1of4"),
    ((5,), 8, 2, "always", "1of2"),
]


@dataclass
class Packet:
    """One packet a source sends: its flits and, if it is broken on purpose, how."""

    src: int
    dst: int | None
    lane: int
    seq: int
    flits: list[int]
    bad: DropKind | None = None


def malformed_packet(cfg: LinkConfig, rng, src: int, kind: DropKind) -> Packet:
    """A packet from ``src`` broken as ``kind`` says."""
    fmt, torus = cfg.fmt, cfg.torus
    here = torus.coord(src)
    good_dst = torus.coord(int(rng.integers(torus.nodes)))
    seq = int(rng.integers(1 << fmt.seq_bits))
    if kind == DropKind.BAD_DEST:
        dst = list(good_dst)
        d = int(rng.integers(torus.dims))
        dst[d] = int(rng.integers(cfg.shape[d], 1 << fmt.coord_bits))
        length = int(rng.integers(1, fmt.max_length + 1))
        data = [int(x) for x in rng.integers(1 << 30, size=length - 1)]
        flits = fmt.packet(tuple(dst), here, length, seq, data)
    elif kind == DropKind.ORPHAN:
        flits = [fmt.body(int(rng.integers(1 << 30)), tail=bool(rng.integers(2)))]
    else:  # a length field that disagrees with the tail
        length = int(rng.integers(1, fmt.max_length + 1))
        actual = int(rng.choice([n for n in range(1, fmt.max_length + 2) if n != length]))
        flits = [fmt.head(good_dst, here, length, seq, single=actual == 1)]
        flits += [fmt.body(i + 1, tail=i == actual - 2) for i in range(actual - 1)]
    return Packet(src, None, 0, seq, flits, kind)


def random_packets(
    cfg: LinkConfig,
    rng: np.random.Generator,
    count: int,
    *,
    pattern: str = "uniform",
    malformed: float = 0.0,
) -> list[list[Packet]]:
    """``count`` packets per node; a share ``malformed`` of them broken at random."""
    fmt, torus = cfg.fmt, cfg.torus
    dests = Destinations(pattern, torus, rng)
    out = []
    for src in range(torus.nodes):
        mine = []
        seq = 0
        for _ in range(count):
            if malformed and rng.random() < malformed:
                kind = MALFORMED[int(rng.integers(len(MALFORMED)))]
                mine.append(malformed_packet(cfg, rng, src, kind))
                continue
            dst = dests.next(src)
            if dst is None:
                continue
            length = int(rng.integers(1, fmt.max_length + 1))
            lane = int(rng.integers(cfg.lanes))
            data = [int(x) for x in rng.integers(1 << min(fmt.payload_bits, 62), size=length - 1)]
            flits = fmt.packet(torus.coord(dst), torus.coord(src), length, seq, data, vc=lane)
            mine.append(Packet(src, dst, lane, seq, flits))
            seq = (seq + 1) % (1 << fmt.seq_bits)
        out.append(mine)
    return out


@dataclass
class CreditFaults:
    """Broken senders: at ``cycle``, the router at ``node`` of each ``(node, port, vc)`` in
    ``sites`` comes to believe it holds ``extra`` credits more for that VC of output ``port``
    than its neighbour's buffer has room for.

    Once that VC backs up it sends without a credit (the neighbour drops and counts
    ``NO_CREDIT``); once it drains it gets back credits it is not owed (ignored and counted,
    ``CREDIT_OVERFLOW``); either way the extra credits are used up and the link works again.
    A bench adds ``extra`` to the credit counter of each site, in every model it compares.
    """

    cycle: int
    sites: list[tuple[int, int, int]]
    extra: int = 2


def credit_faults(
    cfg: LinkConfig, rng: np.random.Generator, share: float = 0.75, cycle: int = 30
) -> CreditFaults:
    """A random ``share`` of ``cfg``'s link output VCs, each given two credits too many at
    ``cycle``.

    Three quarters by default: measured over 1,000 seeds, enough for every run of
    ``TWIN_CASES`` to see both kinds of misuse (the sparsest, ``(2, 3)`` with 4-flit buffers,
    at least 3 ``NO_CREDIT`` drops; with half, 4 runs in 1,000 saw none).
    """
    sites = [
        (node, port, vc)
        for node in range(cfg.torus.nodes)
        for port in range(1, cfg.ports)
        for vc in range(cfg.vcs)
    ]
    picked = rng.choice(len(sites), size=max(1, round(share * len(sites))), replace=False)
    return CreditFaults(cycle, [sites[int(i)] for i in sorted(picked)])
