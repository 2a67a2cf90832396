"""KangaRing: two disjoint Hamiltonian cycles of the 4x4 torus, each run in both directions
(CCi: O(N/2), best above 56 MB), on the trn2 server's 16 chips. The cycles share no link and
use all 32, so the four directed rings (A, A reversed, B, B reversed) use each of the 64
directed links once. Each rank's block is cut in 4 sub-chunks; ring ``h`` carries sub-chunk
``h`` of every block, the four rings in the same steps.

    A: 0 1 2 3 7 4 5 6 10 11 8 9 13 14 15 12      (chips, x + 4 y)
    B: 0 3 15 11 7 6 2 14 10 9 5 1 13 12 8 4

**One rank a chip**, or 16 ranks on 4 chips at LNC=2 (the ranks' own 4x4 torus): ring ``h``
runs the ring algorithm (:mod:`tlm.collectives.ring`) over every rank.

**Ranks sharing the 16 chips** (``m`` = 4 a chip, 64 ranks at LNC=2; or 2, 32 at LNC=4), CCi's
pairs: a chip's ranks pair as ``(2i, 2i+1)``, the first primary on cycle A, the second on B
(each rank active in half the rings). Ring ``h`` is a cycle of the ``M = 8 m`` primaries: chip
after chip along the cycle, a chip's pairs in turn. Pair-block ``k``: sub-chunk ``h`` of the
blocks of pair ``k``'s two ranks. At position ``q`` (primary ``P``, secondary ``S``):

* reduce-scatter: step 0, ``S -> P`` reduces pair-block ``q - 1``; step ``1 + t`` (``t < M -
  1``), ``P -> P(q+1)`` reduces pair-block ``q - t - 1`` and ``S -> P`` pair-block ``q - t -
  2`` (a 3R1W hop); a last step ``P -> S`` copies the secondary's block;
* all-gather: step 0, ``S -> P`` copies the secondary's block; step ``1 + t`` (``t < M``),
  ``P -> P(q+1)`` (``t < M - 1``) and ``P -> S`` copy pair-block ``q - t`` (a 1R2W hop);
* all-reduce: the reduce-scatter but its last step, the all-gather but its first: ``2 M``.

Pair-block ``k`` is reduced ``P(k+1), S(k+1), P(k+2), ..., P(k), S(k)``. The pairs, their
alternation by cycle and the buffer's cut are the model's reading (docs/collectives.md).
"""

from __future__ import annotations

from functools import cache

from .ring import linear, ring_steps
from .schedule import Schedule, Transfer, chain

NAME = "kangaring"
OPS = ("all_reduce", "reduce_scatter", "all_gather")

CYCLE_A = (0, 1, 2, 3, 7, 4, 5, 6, 10, 11, 8, 9, 13, 14, 15, 12)
CYCLE_B = (0, 3, 15, 11, 7, 6, 2, 14, 10, 9, 5, 1, 13, 12, 8, 4)
#: The four directed rings of chips, by sub-chunk.
RINGS = (CYCLE_A, CYCLE_A[::-1], CYCLE_B, CYCLE_B[::-1])
SHAPE = (4, 4)


def _shape(system):
    return system.torus.shape if system.torus is not None else None


def _shared(system):
    """The chips of ``system`` when its ranks share the chips of one 4x4 torus, 2 or 4 on each
    (CCi's pairs: "two ranks out of four"); else None."""
    per = getattr(system, "ranks_per_chip", 1)
    chips = getattr(system, "chips_system", None)
    if chips is None or per not in (2, 4) or chips.nodes != 1 or _shape(chips) != SHAPE:
        return None
    return chips


def fits(system, op) -> str | None:
    """Why KangaRing cannot run on ``system`` (None: it can), in one line."""
    chips = _shared(system)
    whole = getattr(system, "chip_ranks", 0)
    if chips is not None and whole:
        return (
            "needs all the ranks of each chip in the group, for it pairs a chip's ranks (CCi), "
            f"not {system.ranks_per_chip} of its {whole}"
        )
    if chips is None and (system.nodes != 1 or _shape(system) != SHAPE):
        shape = _shape(system)
        what = (
            f"a {system.nodes}-node system"
            if system.nodes > 1
            else (f"a {'x'.join(map(str, shape))} torus" if shape else "a switched system")
        )
        return (
            "needs one 4x4 torus (the trn2 server's 16 chips with 1, 2 or 4 ranks each, or 16 "
            f"ranks on 4 of its chips at LNC=2), not {what}"
        )
    failed = (chips if chips is not None else system).failed
    if failed:  # the two cycles use every link: no failed link can be left out
        a, b = failed[0]
        return (
            f"needs every link of the 4x4 torus, for its two Hamiltonian cycles use them all, "
            f"and the link {a}-{b} has failed"
        )
    return None


def build(op, system) -> Schedule:
    if _shared(system) is not None:
        return _paired(op, system.ranks_per_chip)
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


def pairs(per_chip: int) -> list[list[tuple[int, int]]]:
    """Per directed ring: its positions in order, each ``(primary, secondary)`` ranks, for
    ``per_chip`` ranks a chip (rank ``c per_chip + i`` the ``i``-th of chip ``c``)."""
    out = []
    for h in range(len(RINGS)):
        cycle, first = (CYCLE_A, 0) if h < 2 else (CYCLE_B, 1)
        seq = [
            (c * per_chip + i + first, c * per_chip + i + 1 - first)
            for c in cycle
            for i in range(0, per_chip, 2)
        ]
        out.append(seq[::-1] if h % 2 else seq)
    return out


def _paired(op, per_chip: int) -> Schedule:
    """KangaRing over ``16 per_chip`` ranks, a chip's ranks in primary-secondary pairs (see
    the module docstring)."""
    r, rings = 16 * per_chip, pairs(per_chip)
    m = len(rings[0])
    reduce_scatter, all_gather = op != "all_gather", op != "reduce_scatter"

    def ring(h):
        seq = rings[h]

        def block(k, which=(0, 1)):
            pair = seq[k % m]
            return [4 * pair[w] + h for w in which]

        def move(src, dst, chunks, reduce):
            return [Transfer(src, dst, c, c + 1, reduce) for c in chunks]

        steps = []
        if reduce_scatter:
            steps.append(
                [t for q, (p, s) in enumerate(seq) for t in move(s, p, block(q - 1), True)]
            )
            for t in range(m - 1):
                on = [
                    x
                    for q, (p, _) in enumerate(seq)
                    for x in move(p, seq[(q + 1) % m][0], block(q - t - 1), True)
                ]
                on += [
                    x for q, (p, s) in enumerate(seq) for x in move(s, p, block(q - t - 2), True)
                ]
                steps.append(on)
            if not all_gather:
                steps.append(
                    [x for q, (p, s) in enumerate(seq) for x in move(p, s, block(q, (1,)), False)]
                )
        if all_gather:
            if not reduce_scatter:
                steps.append(
                    [x for q, (p, s) in enumerate(seq) for x in move(s, p, block(q, (1,)), False)]
                )
            for t in range(m):
                on = []
                if t < m - 1:
                    on += [
                        x
                        for q, (p, _) in enumerate(seq)
                        for x in move(p, seq[(q + 1) % m][0], block(q - t), False)
                    ]
                own = (0,) if t == 0 and not reduce_scatter else (0, 1)
                on += [
                    x for q, (p, s) in enumerate(seq) for x in move(p, s, block(q - t, own), False)
                ]
                steps.append(on)
        return steps

    groups = None
    for h in range(len(RINGS)):
        steps = ring(h)
        groups = steps if groups is None else [a + b for a, b in zip(groups, steps, strict=True)]
    where = [{rank: q for q, pair in enumerate(seq) for rank in pair} for seq in rings]

    @cache
    def order_of(chunk):
        rank, h = divmod(chunk, 4)
        seq, k = rings[h], where[h][rank]
        return chain(x for i in range(m) for x in seq[(k + 1 + i) % m])

    def order(rank, chunk):
        return order_of(chunk)

    return Schedule(
        op, NAME, tuple(range(r)), r, 4, linear(groups, op), order if reduce_scatter else None
    )
