"""Rings of rings: a ring per torus dimension in turn (the torus-native reduce-scatter,
all-gather and all-reduce), O(sum of the ring sizes) steps where one ring over every rank
takes O(product).

The dimensions are the torus's and, on several nodes, the nodes (a ring over EFA): every level of
a hierarchy at once - the cores of a chip too, on ranks (:mod:`~tlm.collectives.runtime`).
Ranks are numbered over the dimensions from the slowest (by its links' bandwidth) to the fastest,
so the reduce-scatter crosses the slowest last, with the least data, and the all-gather first;
rank ``j``'s share is block ``j``. With the dimensions so ordered, of sizes ``(k0, k1, ...)``:

=============== ================================================================ ==============
op              phases (every ring of the dimension at once)                     steps
=============== ================================================================ ==============
reduce_scatter  a ring reduce-scatter along the last dimension, then the one      sum (k - 1)
                before, ... down to dimension 0: along dimension ``d`` a rank
                sends the blocks whose owners share its coordinates above ``d``
                and have ``x`` in ``d`` (a contiguous range: ``k0 ... k(d-1)``
                blocks)
all_gather      the same ranges, dimension 0 first, in ring all-gather steps      sum (k - 1)
all_reduce      reduce-scatter, then all-gather                                   2 sum (k - 1)
=============== ================================================================ ==============

Each phase moves ``1 / (k0 ... kd)`` of the buffer per step where the ring over every rank
moves ``1 / r``, so the bytes each rank sends are the ring's, ``2 (r - 1) / r`` of the buffer
for an all-reduce, in far fewer steps (a 4x4x4 torus: 18 instead of 126). Every ring runs both
ways at once: each block's first half (sub-chunk 0) goes to the + neighbour, its second half to
the - neighbour, so both directions of every link carry data.

Block ``b`` (owner coordinates ``o``) is reduced as the phases reduce it: along the last
dimension first, from the position after ``o`` there (before it, for the second half), as the
ring does; the partial sums so made
along the dimension before, from the position after ``o``; and so on. Every rank ends with the
same bits.
"""

from __future__ import annotations

from functools import cache

from .ring import linear
from .schedule import Schedule, Transfer, chain

NAME = "rings"
OPS = ("all_reduce", "reduce_scatter", "all_gather")
#: The two ways round every ring: each block's first half goes +, its second half -.
WAYS = (1, -1)


def fits(system, op) -> str | None:
    if system.torus is None:
        return "needs a torus in each node (a ring per dimension), not a switched system"
    return None


def dimensions(system) -> list[tuple[int, float]]:
    """``(ring size, bandwidth)`` of each dimension: the torus's in order, then the nodes (a
    ring over them, over EFA) when there are several; the bandwidth is the slowest link from
    chip 0 to its neighbour along it."""
    torus, per = system.torus, system.chips_per_node
    dims = []
    for d, k in enumerate(torus.shape):
        step = torus.node(tuple(1 if j == d else 0 for j in range(torus.dims)))
        dims.append((k, _bandwidth(system, 0, step)))
    if system.nodes > 1:
        dims.append((system.nodes, _bandwidth(system, 0, per)))
    return dims


def _bandwidth(system, a: int, b: int) -> float:
    return float(min(system.bandwidth_Bps[i] for i in system.path(a, b)))


def build(op, system) -> Schedule:
    dims = dimensions(system)
    # the slowest dimension varies fastest in the ranks' numbers, so the reduce-scatter crosses
    # it last (with the least data) and the all-gather first
    order = sorted(range(len(dims)), key=lambda i: (dims[i][1], i))
    shape = [dims[i][0] for i in order]
    torus, per = system.torus, system.chips_per_node
    n = len(shape)
    span = [1]
    for k in shape[:-1]:
        span.append(span[-1] * k)  # blocks whose owners differ below dimension d
    r = span[-1] * shape[-1]
    coords = []
    for rank in range(r):
        c = []
        for k in shape:
            rank, digit = divmod(rank, k)
            c.append(digit)
        coords.append(tuple(c))

    def number(c) -> int:
        return sum(x * s for x, s in zip(c, span, strict=True))

    def chip(c) -> int:
        real = [0] * len(dims)
        for m, i in enumerate(order):
            real[i] = c[m]
        node = real[torus.dims] if len(dims) > torus.dims else 0
        return node * per + torus.node(tuple(real[: torus.dims]))

    # per dimension, per rank: its first block's offset from the coordinates above the
    # dimension, and its neighbour each way along it
    above = [[sum(c[j] * span[j] for j in range(d + 1, n)) for c in coords] for d in range(n)]
    ahead = [
        [
            [
                number(tuple((c[j] + way) % shape[d] if j == d else c[j] for j in range(n)))
                for c in coords
            ]
            for way in WAYS
        ]
        for d in range(n)
    ]

    def sends(d, t, reduce):
        """One ring step along dimension ``d``, both ways at once: every rank sends the first
        half of each block it passes on to its + neighbour there, the second half to its -."""
        moves = []
        k, blocks = shape[d], span[d]
        shift = t + (1 if reduce else 0)
        for p, c in enumerate(coords):
            for half, way in enumerate(WAYS):
                start = (c[d] - way * shift) % k * blocks + above[d][p]
                dst = ahead[d][half][p]
                moves += [
                    Transfer(p, dst, 2 * b + half, 2 * b + half + 1, reduce)
                    for b in range(start, start + blocks)
                ]
        return moves

    groups = []
    if op != "all_gather":
        for d in reversed(range(n)):
            groups += [sends(d, t, True) for t in range(shape[d] - 1)]
    if op != "reduce_scatter":
        for d in range(n):
            groups += [sends(d, t, False) for t in range(shape[d] - 1)]

    @cache
    def order_of(chunk):
        block, half = divmod(chunk, 2)
        owner, way = coords[block], WAYS[half]

        def partial(d, low):
            if d == n:
                return number(low)
            k = shape[d]
            nxt = ((owner[d] + way * (1 + i)) % k for i in range(k))
            return chain(partial(d + 1, (*low, x)) for x in nxt)

        return partial(0, ())

    def order_fn(rank, chunk):
        return order_of(chunk)

    chips = tuple(chip(c) for c in coords)
    reducing = op != "all_gather"
    return Schedule(op, NAME, chips, r, 2, linear(groups, op), order_fn if reducing else None)
