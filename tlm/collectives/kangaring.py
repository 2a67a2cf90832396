"""KangaRing: two disjoint Hamiltonian cycles of the 4x4 torus, each run in both directions
(CCi: O(N/2), best above 56 MB). Only on a 4x4 torus (the trn2 server).

The 4x4 torus has 32 links (each both ways); the two cycles below share none and use them all,
so the four directed rings (A, A reversed, B, B reversed) use each of the 64 directed links
once. The buffer is cut into 16 blocks of 4 sub-chunks; ring ``h`` runs the ring algorithm
(:mod:`tlm.collectives.ring`) on sub-chunk ``h`` of every block, the four rings in the same
steps. Ranks are chips in their own order.

    A: 0 1 2 3 7 4 5 6 10 11 8 9 13 14 15 12      (chips, x + 4 y)
    B: 0 3 15 11 7 6 2 14 10 9 5 1 13 12 8 4

Sub-chunk ``h`` of block ``b`` is reduced along ring ``h`` from the rank after ``b``, as in
the ring.

How the runtime cuts the buffer between the cycles and what "O(N/2)" counts are not published:
this is the model's reading (docs/collectives.md).
"""

from __future__ import annotations

from functools import cache

from .ring import linear, ring_steps
from .schedule import Schedule, chain

NAME = "kangaring"
OPS = ("all_reduce", "reduce_scatter", "all_gather")

CYCLE_A = (0, 1, 2, 3, 7, 4, 5, 6, 10, 11, 8, 9, 13, 14, 15, 12)
CYCLE_B = (0, 3, 15, 11, 7, 6, 2, 14, 10, 9, 5, 1, 13, 12, 8, 4)
#: The four directed rings, by sub-chunk.
RINGS = (CYCLE_A, CYCLE_A[::-1], CYCLE_B, CYCLE_B[::-1])


def fits(system, op) -> str | None:
    shape = system.torus.shape if system.torus is not None else None
    if system.nodes != 1 or shape != (4, 4):
        what = (
            f"a {system.nodes}-node system"
            if system.nodes > 1
            else (f"a {'x'.join(map(str, shape))} torus" if shape else "a switched system")
        )
        return (
            "needs one 4x4 torus (the trn2 server's 16 chips, one rank each, or 16 ranks on 4 "
            f"of its chips at LNC=2), not {what}"
        )
    if system.failed:  # the two cycles use every link: no failed link can be left out
        a, b = system.failed[0]
        return (
            f"needs every link of the 4x4 torus, for its two Hamiltonian cycles use them all, "
            f"and the link {a}-{b} has failed"
        )
    return None


def build(op, system) -> Schedule:
    r = 16
    groups = None
    for h, seq in enumerate(RINGS):
        ring = ring_steps(list(seq), 4, h, op != "all_gather", op != "reduce_scatter")
        groups = ring if groups is None else [a + b for a, b in zip(groups, ring, strict=True)]
    where = [{rank: p for p, rank in enumerate(seq)} for seq in RINGS]

    @cache
    def order_of(chunk):
        block, h = divmod(chunk, 4)
        seq, p = RINGS[h], where[h][block]
        return chain(seq[(p + 1 + i) % r] for i in range(r))

    def order(rank, chunk):
        return order_of(chunk)

    reducing = op != "all_gather"
    return Schedule(
        op, NAME, tuple(range(r)), r, 4, linear(groups, op), order if reducing else None
    )
