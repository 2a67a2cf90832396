"""Ring: every rank passes to the next one round a Hamiltonian cycle (CCi: O(N) steps).

Ranks are ring positions (:func:`~tlm.collectives.mapping.ring_order`). With ``r`` ranks:

=============== ============================================================ ===========
op              step ``t``: position ``p`` sends to ``p + 1``                 steps
=============== ============================================================ ===========
reduce_scatter  block ``(p - t - 1) mod r``, reduced into the next one's      r - 1
all_gather      block ``(p - t) mod r``, copied                               r - 1
all_reduce      reduce-scatter, then all-gather                               2 (r - 1)
broadcast       (root 0) chunk ``t - p`` when ``0 <= t - p < r``, copied:     2 r - 2
                the buffer in ``r`` chunks pipelined down the ring
=============== ============================================================ ===========

Block ``b`` is reduced along the ring from the position after ``b``: ``((x[b+1] + x[b+2]) +
...) + x[b]``, so every rank ends with the same bits.

    p0 -> p1 -> p2 -> ... -> p(r-1) -> p0
"""

from __future__ import annotations

from functools import cache

from .mapping import ring_order
from .schedule import Schedule, Step, Transfer, chain

NAME = "ring"
OPS = ("all_reduce", "reduce_scatter", "all_gather", "broadcast")


def fits(system, op) -> str | None:
    """Why the ring cannot run ``op`` on ``system`` (None: it can)."""
    return None if system.chips >= 2 else "needs 2 or more chips"


def ring_steps(seq, subs, sub, reduce_scatter, all_gather, group=1):
    """The steps of a ring reduce-scatter and/or all-gather over ranks ``seq`` (in ring order),
    on sub-chunk ``sub`` of each block (``group`` sub-chunks from it): one list of transfers
    per step, for callers that run several rings in the same steps."""
    r = len(seq)
    out = []
    phases = ([True] if reduce_scatter else []) + ([False] if all_gather else [])
    pairs = list(zip(seq, [*seq[1:], seq[0]], strict=True))  # position p sends to p + 1
    firsts = [b * subs + sub for b in seq]  # of the block of each position
    for reduce in phases:
        for t in range(r - 1):
            k = r - (t + (1 if reduce else 0)) % r  # position p sends block seq[p - t (- 1)]
            sent = firsts[k:] + firsts[:k]
            out.append(
                [
                    Transfer(src, dst, first, first + group, reduce)
                    for (src, dst), first in zip(pairs, sent, strict=True)
                ]
            )
    return out


def linear(groups, label) -> tuple[Step, ...]:
    """Steps each waiting for the one before."""
    return tuple(
        Step(tuple(moves), (i - 1,) if i else (), f"{label} {i}") for i, moves in enumerate(groups)
    )


def build(op, system) -> Schedule:
    chips = tuple(ring_order(system))
    r = len(chips)
    seq = list(range(r))
    if op == "broadcast":
        groups = []
        for t in range(2 * r - 2):
            groups.append(
                [
                    Transfer(p, p + 1, t - p, t - p + 1, False)
                    for p in range(r - 1)
                    if 0 <= t - p < r
                ]
            )
        return Schedule(op, NAME, chips, r, 1, linear(groups, "broadcast"))
    groups = ring_steps(seq, 1, 0, op != "all_gather", op != "reduce_scatter")

    @cache
    def order_of(chunk):
        return chain((chunk + 1 + i) % r for i in range(r))

    def order(rank, chunk):  # every rank ends with the same tree
        return order_of(chunk)

    reducing = op != "all_gather"
    return Schedule(op, NAME, chips, r, 1, linear(groups, op), order if reducing else None)
