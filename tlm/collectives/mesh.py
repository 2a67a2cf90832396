"""Mesh (direct): every rank sends straight to every other rank (CCi: O(1) steps, best below
1 MB). The single-step Mesh for small all-reduce is :mod:`tlm.collectives.mesh1`.

Ranks are chips in their own order. With ``r`` ranks, ``d = 1 .. r-1``:

=============== ================================================================ =====
op              what each rank ``i`` sends                                        steps
=============== ================================================================ =====
reduce_scatter  block ``j`` to rank ``j`` (reduced), for every ``j != i``          1
all_gather      its block ``i`` to every other rank                               1
all_reduce      reduce-scatter, then all-gather                                   2
all_to_all      block ``j`` to rank ``j``, into block ``i``                        1
broadcast       (root 0) the whole buffer to every other rank                     1
permute         the whole buffer to rank ``i + 1 mod r`` (send/recv)              1
=============== ================================================================ =====

Rank ``j`` adds the blocks it receives in the order ``j + 1, j + 2, ...`` (mod ``r``) onto its
own: ``((x[j] + x[j+1]) + x[j+2]) + ...``, and the all-gather copies that result to every rank.
"""

from __future__ import annotations

from functools import cache

from .schedule import Schedule, Step, Transfer, chain

NAME = "mesh"
OPS = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all", "broadcast", "permute")


def fits(system, op) -> str | None:
    return None if system.chips >= 2 else "needs 2 or more chips"


def _order(r):
    @cache
    def order_of(chunk):
        return chain((chunk + i) % r for i in range(r))

    def order(rank, chunk):  # block ``chunk`` is reduced on rank ``chunk``, then copied
        return order_of(chunk)

    return order


def build(op, system) -> Schedule:
    r = system.chips
    chips = tuple(range(r))
    moves: list[list[Transfer]] = []
    if op in ("reduce_scatter", "all_reduce"):
        moves.append(
            [Transfer((j + d) % r, j, j, j + 1, True) for d in range(1, r) for j in range(r)]
        )
    if op in ("all_gather", "all_reduce"):
        moves.append(
            [Transfer(i, (i + d) % r, i, i + 1, False) for d in range(1, r) for i in range(r)]
        )
    if op == "all_to_all":
        moves.append(
            [
                Transfer(i, (i + d) % r, (i + d) % r, (i + d) % r + 1, False, at=i)
                for d in range(1, r)
                for i in range(r)
            ]
        )
    if op == "broadcast":
        moves.append([Transfer(0, j, 0, 1, False) for j in range(1, r)])
    if op == "permute":
        moves.append([Transfer(i, (i + 1) % r, 0, 1, False) for i in range(r)])
    blocks = 1 if op in ("broadcast", "permute") else r
    steps = tuple(Step(tuple(m), (i - 1,) if i else (), f"{op} {i}") for i, m in enumerate(moves))
    reducing = op in ("reduce_scatter", "all_reduce")
    return Schedule(op, NAME, chips, blocks, 1, steps, _order(r) if reducing else None)
