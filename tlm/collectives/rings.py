"""Rings of rings: a ring per torus dimension in turn (the torus-native reduce-scatter,
all-gather and all-reduce), O(sum of the ring sizes) steps where one ring over every rank
takes O(product).

Ranks are the torus's nodes in their own order (dimension 0 fastest); rank ``j``'s share is
block ``j``. On a torus of shape ``(k0, k1, ...)``:

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
for an all-reduce, in far fewer steps (a 4x4x4 torus: 18 instead of 126).

Block ``b`` (owner coordinates ``o``) is reduced as the phases reduce it: along the last
dimension first, from the position after ``o`` there, as the ring does; the partial sums so made
along the dimension before, from the position after ``o``; and so on. Every rank ends with the
same bits.
"""

from __future__ import annotations

from functools import cache

from .ring import linear
from .schedule import Schedule, Transfer, chain

NAME = "rings"
OPS = ("all_reduce", "reduce_scatter", "all_gather")


def fits(system, op) -> str | None:
    if system.torus is None:
        return "needs a torus (a ring per dimension), not a switched system"
    if system.nodes != 1:
        return f"needs one torus, not a {system.nodes}-node system (hierarchical joins nodes)"
    return None


def build(op, system) -> Schedule:
    torus = system.torus
    shape, r = torus.shape, system.chips
    dims = len(shape)
    span = [1]
    for k in shape[:-1]:
        span.append(span[-1] * k)  # blocks whose owners differ below dimension d
    coords = [torus.coord(n) for n in range(r)]

    def sends(d, t, reduce):
        """One ring step along dimension ``d``: every rank to its + neighbour there."""
        moves = []
        k = shape[d]
        for p, c in enumerate(coords):
            x = (c[d] - t - (1 if reduce else 0)) % k
            start = x * span[d] + sum(c[j] * span[j] for j in range(d + 1, dims))
            dst = torus.node(tuple((c[j] + 1) % k if j == d else c[j] for j in range(dims)))
            moves.append(Transfer(p, dst, start, start + span[d], reduce))
        return moves

    groups = []
    if op != "all_gather":
        for d in reversed(range(dims)):
            groups += [sends(d, t, True) for t in range(shape[d] - 1)]
    if op != "reduce_scatter":
        for d in range(dims):
            groups += [sends(d, t, False) for t in range(shape[d] - 1)]

    @cache
    def order_of(block):
        owner = coords[block]

        def partial(d, low):
            if d == dims:
                return torus.node(low)
            k = shape[d]
            return chain(partial(d + 1, (*low, (owner[d] + 1 + i) % k)) for i in range(k))

        return partial(0, ())

    def order(rank, chunk):
        return order_of(chunk)

    reducing = op != "all_gather"
    return Schedule(
        op, NAME, tuple(range(r)), r, 1, linear(groups, op), order if reducing else None
    )
