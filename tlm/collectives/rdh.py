"""Recursive doubling and halving (``rdh``): the ranks as a hypercube, ``log2 r`` exchanges
(CCi: O(log N), best from 1 to 56 MB). Ranks must be a power of two.

Rank ``l`` runs on the chip :func:`~tlm.collectives.mapping.hypercube_order` gives it: on the
4x4 torus each dimension's ring of 4 is a 2-cube by its Gray code (0, 1, 3, 2), so the torus is
a 4-cube and every exchange is between neighbours. With ``r = 2^n`` ranks:

=============== =================================================================== =====
op              step ``k`` (``k = 0 .. n-1``)                                         steps
=============== =================================================================== =====
reduce_scatter  halving: ``h = r / 2^(k+1)``; rank ``l`` keeps the half of its blocks  n
                that holds block ``l`` and sends the other half to ``l xor h``,
                which reduces it
all_gather      doubling: ``h = 2^k``; rank ``l`` sends the ``h`` blocks it has to     n
                ``l xor h``
all_reduce      halving, then doubling                                               2 n
broadcast       (root 0) binomial tree: ranks below ``2^k`` send the buffer to         n
                ``l + 2^k``
=============== =================================================================== =====

Block ``b`` is reduced as a balanced tree: step 0 pairs ranks ``a`` and ``a xor r/2``, step 1
those pairs with the pairs ``r/4`` away, and so on (:func:`order`).

    step 0:  0 <-> 8   1 <-> 9  ...     step 1:  0 <-> 4  ...     step 3:  0 <-> 1  ...
"""

from __future__ import annotations

from functools import cache

from .mapping import hypercube_order
from .schedule import Schedule, Step, Transfer

NAME = "rdh"
OPS = ("all_reduce", "reduce_scatter", "all_gather", "broadcast")


def fits(system, op) -> str | None:
    r = system.chips
    if r < 2 or r & (r - 1):
        return f"needs a power of two of ranks, not {r}"
    return None


def _partial(a, k, r):
    """The tree of rank ``a``'s partial sum after ``k`` halving steps."""
    if k == 0:
        return a
    return (_partial(a, k - 1, r), _partial(a ^ (r >> k), k - 1, r))


def build(op, system) -> Schedule:
    r = system.chips
    n = r.bit_length() - 1
    chips = tuple(hypercube_order(system))
    groups = []
    if op == "broadcast":
        for k in range(n):
            h = 1 << k
            groups.append([Transfer(a, a + h, 0, 1, False) for a in range(h)])
    if op in ("reduce_scatter", "all_reduce"):
        for k in range(n):
            h = r >> (k + 1)
            moves = []
            for a in range(r):
                lo = a & ~(2 * h - 1)
                send = lo if a & h else lo + h  # the half without block a
                moves.append(Transfer(a, a ^ h, send, send + h, True))
            groups.append(moves)
    if op in ("all_gather", "all_reduce"):
        for k in range(n):
            h = 1 << k
            groups.append(
                [Transfer(a, a ^ h, a & ~(h - 1), (a & ~(h - 1)) + h, False) for a in range(r)]
            )
    steps = tuple(Step(tuple(m), (i - 1,) if i else (), f"{op} {i}") for i, m in enumerate(groups))

    @cache
    def order_of(chunk):
        return _partial(chunk, n, r)

    def order(rank, chunk):
        return order_of(chunk)

    reducing = op in ("reduce_scatter", "all_reduce")
    blocks = 1 if op == "broadcast" else r
    return Schedule(op, NAME, chips, blocks, 1, steps, order if reducing else None)
