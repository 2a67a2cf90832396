"""Hierarchical all-reduce over nodes joined by EFA (CCe): reduce-scatter inside each node, an
all-reduce between the nodes over EFA, an all-gather inside each node.

``N`` nodes of ``L`` chips; rank ``n L + p`` is position ``p`` of node ``n``'s ring
(:func:`~tlm.collectives.mapping.ring_order`). The buffer is cut into ``L`` blocks of ``N``
sub-chunks.

=========================== =========================================================== ========
phase                       what moves                                                  steps
=========================== =========================================================== ========
intra-node reduce-scatter   ring in every node at once: block ``(p - t - 1) mod L``       L - 1
                            (all ``N`` sub-chunks) to position ``p + 1``
inter-node all-reduce       ring over the nodes for every position ``p`` at once, on    2 (N - 1)
                            the sub-chunks of block ``p``: reduce-scatter then
                            all-gather, over EFA
intra-node all-gather       ring in every node: block ``(p - t) mod L`` to ``p + 1``      L - 1
=========================== =========================================================== ========

Sub-chunk ``s`` of block ``b`` is the ring sum over the nodes, from node ``s + 1``, of each
node's ring sum of block ``b`` from position ``b + 1``: every rank ends with the same bits.
"""

from __future__ import annotations

from functools import cache

from .mapping import ring_order
from .ring import linear
from .schedule import Schedule, Transfer, chain

NAME = "hierarchical"
OPS = ("all_reduce",)


def fits(system, op) -> str | None:
    if system.nodes < 2:
        return f"needs 2 or more nodes joined by EFA (NxSYSTEM), not {system.name}"
    return None


def build(op, system) -> Schedule:
    N, L = system.nodes, system.chips_per_node
    chips = tuple(ring_order(system))
    groups = []
    for reduce in (True, False):
        if not reduce:
            for t in range(N - 1):  # the inter-node all-gather, after its reduce-scatter
                groups.append(_inter(N, L, t, False))
        for t in range(L - 1):
            moves = []
            for n in range(N):
                for p in range(L):
                    b = (p - t - (1 if reduce else 0)) % L
                    src, dst = n * L + p, n * L + (p + 1) % L
                    moves.append(Transfer(src, dst, b * N, b * N + N, reduce))
            groups.append(moves)
        if reduce:
            for t in range(N - 1):
                groups.append(_inter(N, L, t, True))
    # groups: intra-node reduce-scatter, inter-node reduce-scatter and all-gather, intra-node
    # all-gather

    @cache
    def order_of(chunk):
        b, s = divmod(chunk, N)
        nodes = [(s + 1 + i) % N for i in range(N)]
        return chain(chain(n * L + (b + 1 + i) % L for i in range(L)) for n in nodes)

    def order(rank, chunk):
        return order_of(chunk)

    return Schedule(op, NAME, chips, L, N, linear(groups, op), order)


def _inter(N, L, t, reduce):
    moves = []
    for p in range(L):
        for n in range(N):
            s = (n - t - (1 if reduce else 0)) % N
            first = p * N + s
            moves.append(Transfer(n * L + p, ((n + 1) % N) * L + p, first, first + 1, reduce))
    return moves
