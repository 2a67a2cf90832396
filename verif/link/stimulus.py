"""Seeded random packets for the router and network benches.

Each node gets a list of packets (``Packet``): destination from a traffic pattern, random
length, lane and data; with ``malformed`` some are deliberately broken in each of the ways the
router must drop (:class:`~tlm.link.config.DropKind`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tlm.link.config import MALFORMED, DropKind, LinkConfig
from tlm.link.traffic import Destinations

__all__ = ["Packet", "random_packets", "malformed_packet", "TWIN_CASES"]

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
