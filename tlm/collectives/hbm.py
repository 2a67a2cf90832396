"""The HBM traffic of a collective's steps: what each transfer reads and writes, in chunks.

The Neuron docs' intra-node page (CCi) counts a step's HBM accesses per hop: a ring all-gather
hop reads the chunk once and writes it once (1R1W), a ring reduce-scatter hop reads two
operands and writes their sum (2R1W). KangaRing's DMA duplication (one read written to two
destinations) does a chunk's two hops in one 1R2W (all-gather: 3 accesses for Ring's 4) or
one 3R1W (reduce-scatter: 4 for Ring's 6). Per transfer of a schedule, as parts
``(fraction, source accesses, destination accesses)`` of its chunks:

============ ============================== ======================================
algorithm    copy                           reduce
============ ============================== ======================================
any          ``(1, 1, 1)``: 1R src, 1W dst   ``(1, 1, 2)``: 1R src; 1R 1W dst
kangaring    ``(1/2, 1, 1), (1/2, 0, 1)``    ``(1/2, 1, 2), (1/2, 1, 0)``
============ ============================== ======================================

A reduction reads the incoming partial at the source, and at the destination the operand it
adds and the sum it writes (where the values engine adds). Every access moves the chunk's bytes
through its chip's HBM, shared by all the chip's ranks (``hbm_Bps``, the chip preset's
``hbm_bandwidth_Bps``). Mesh's duplication is not published and not charged.

Examples
--------
>>> accesses("ring", reduce=True), accesses("kangaring", reduce=False)
((1.0, 2.0), (0.5, 1.0))
"""

from __future__ import annotations

import numpy as np

__all__ = ["PARTS", "parts", "accesses", "transfer_accesses", "flow_split", "flow_hbm"]

#: Per algorithm (``None``: every other) and copy (False) or reduce (True): the parts of a
#: transfer's chunks, ``(fraction, source accesses, destination accesses)`` (CCi).
PARTS = {
    None: {False: ((1.0, 1, 1),), True: ((1.0, 1, 2),)},
    "kangaring": {False: ((0.5, 1, 1), (0.5, 0, 1)), True: ((0.5, 1, 2), (0.5, 1, 0))},
}


def parts(algorithm: str, reduce: bool) -> tuple:
    """The parts ``(fraction, source accesses, destination accesses)`` of a transfer."""
    return PARTS.get(algorithm, PARTS[None])[bool(reduce)]


def accesses(algorithm: str, reduce: bool) -> tuple[float, float]:
    """HBM accesses a transfer makes per chunk it carries, at its source and destination."""
    split = parts(algorithm, reduce)
    return (
        float(sum(f * s for f, s, _ in split)),
        float(sum(f * d for f, _, d in split)),
    )


def transfer_accesses(schedule) -> tuple[np.ndarray, np.ndarray]:
    """Per transfer of ``schedule`` (in :attr:`Schedule.moves` order): its HBM accesses per
    chunk at the source and at the destination."""
    reduce = schedule.reduces
    table = np.array([accesses(schedule.algorithm, r) for r in (False, True)])
    return table[reduce.astype(np.intp), 0], table[reduce.astype(np.intp), 1]


def flow_split(schedule, stacks):
    """``split(transfer)`` for :func:`tlm.collectives.flow.step_flows`: each part of the
    transfer's chunks as flows through its HBM accesses, spread equally over the stacks
    ``stacks(rank)`` (resource names) of the chip each of the schedule's ranks runs on."""

    def split(t):
        src, dst = stacks(t.src), stacks(t.dst)
        share = 1.0 / len(src)
        return [
            (fraction * share, (a,) * at_src, (b,) * at_dst)
            for fraction, at_src, at_dst in parts(schedule.algorithm, t.reduce)
            for a, b in zip(src, dst, strict=True)
        ]

    return split


def flow_hbm(schedule, system):
    """The HBM of ``system``'s chips as flow-engine resources for ``schedule``:
    ``(capacities, split)`` - ``{("hbm", chip): hbm_Bps}`` and :func:`flow_split` over them -
    or ``(None, None)`` on a system that does not charge HBM (no ``hbm_Bps``)."""
    rate = getattr(system, "hbm_Bps", None)
    if not rate:
        return None, None
    chips = system.chip_of(np.asarray(schedule.chips, dtype=np.int64)).tolist()
    capacities = {("hbm", c): float(rate) for c in sorted(set(chips))}
    return capacities, flow_split(schedule, lambda rank: (("hbm", chips[rank]),))
