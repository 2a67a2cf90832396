"""Single-step Mesh all-reduce (``mesh1``): for small buffers, every rank sends its whole buffer
to every other rank in one step and each rank adds them all itself.

One step; each rank sends ``(r - 1)`` buffers. Rank ``j`` adds in the order ``j + 1, j + 2,
...`` (mod ``r``) onto its own, ``((x[j] + x[j+1]) + x[j+2]) + ...``: the ranks add in
different orders, so their results may differ in the last bit (the numerics contract allows
it for this algorithm only; the others give every rank the same bits).

    every rank --(whole buffer)--> every other rank, at once
"""

from __future__ import annotations

from .schedule import Schedule, Step, Transfer, chain

NAME = "mesh1"
OPS = ("all_reduce",)


def fits(system, op) -> str | None:
    return None if system.chips >= 2 else "needs 2 or more chips"


def build(op, system) -> Schedule:
    r = system.chips
    moves = tuple(Transfer((j + d) % r, j, 0, 1, True) for d in range(1, r) for j in range(r))

    def order(rank, chunk):
        return chain((rank + i) % r for i in range(r))

    return Schedule(op, NAME, tuple(range(r)), 1, 1, (Step(moves, (), "all_reduce 0"),), order)
