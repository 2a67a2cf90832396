"""Ranks onto chips: the orders the algorithms lay their ranks out in.

* :func:`ring_order` - a Hamiltonian cycle of each node (a torus walked as a snake, the
  reflected mixed-radix Gray code: consecutive chips are torus neighbours, and on rings of even
  size the last chip neighbours the first), nodes one after another;
* :func:`hypercube_order` - rank ``l`` on the chip whose coordinate in each torus dimension is
  the Gray code of ``l``'s digit there: on rings of 2 or 4 chips, ranks whose labels differ in
  one bit are torus neighbours, so the 4x4 torus is a 4-cube and recursive doubling/halving
  exchanges only with neighbours.

Examples
--------
>>> from tlm.system import load_system
>>> ring_order(load_system("trn2-server"))[:8]
[0, 1, 2, 3, 7, 6, 5, 4]
>>> hypercube_order(load_system("trn2-server"))[:4]          # x: 0, 1, 3, 2
[0, 1, 3, 2]
"""

from __future__ import annotations

import itertools

__all__ = ["ring_order", "local_ring", "hypercube_order", "gray", "snake"]


def gray(i: int) -> int:
    """The reflected binary Gray code of ``i``."""
    return i ^ (i >> 1)


def snake(shape) -> list[tuple[int, ...]]:
    """Every coordinate of ``shape`` (dimension 0 fastest), each a neighbour of the last."""
    if len(shape) == 1:
        return [(i,) for i in range(shape[0])]
    inner = snake(shape[:-1])
    out = []
    for c in range(shape[-1]):
        out += [s + (c,) for s in (inner if c % 2 == 0 else inner[::-1])]
    return out


def local_ring(system, node: int = 0) -> list[int]:
    """Local chip number of each position of node ``node``'s ring: the snake, or, when a link
    of that node has failed, the first of the snakes over the dimensions in another order and
    moved round the torus that avoids every failed link (the snake itself if none does: its
    transfers then take detours)."""
    if system.torus is None:
        return list(range(system.chips_per_node))
    t = system.torus
    rings = _snakes(t.shape)
    first = [t.node(c) for c in next(rings)]
    if not system.failed:
        return first
    base = node * system.chips_per_node
    failed = {frozenset(pair) for pair in system.failed}
    for ring in itertools.chain([first], ([t.node(c) for c in r] for r in rings)):
        pairs = zip(ring, ring[1:] + ring[:1], strict=True)
        if not any(frozenset((base + a, base + b)) in failed for a, b in pairs):
            return ring
    return first


def _snakes(shape):
    """Hamiltonian cycles of a torus: the snake over the dimensions in every order, moved to
    start at every coordinate (the plain snake first)."""
    dims = len(shape)
    for perm in itertools.permutations(range(dims)):
        walk = snake(tuple(shape[d] for d in perm))
        inverse = [perm.index(d) for d in range(dims)]
        walk = [tuple(c[inverse[d]] for d in range(dims)) for c in walk]
        for start in itertools.product(*(range(k) for k in shape)):
            moved = zip(walk, [start] * len(walk), strict=True)
            yield [
                tuple((a + b) % k for a, b, k in zip(c, s, shape, strict=True)) for c, s in moved
            ]


def _add(coord, by, shape) -> tuple[int, ...]:
    return tuple((a + b) % k for a, b, k in zip(coord, by, shape, strict=True))


def ring_order(system) -> list[int]:
    """Chip of each ring position: each node's Hamiltonian cycle, node after node."""
    per = system.chips_per_node
    return [n * per + c for n in range(system.nodes) for c in local_ring(system, n)]


def hypercube_order(system) -> list[int]:
    """Chip of each hypercube label (ranks a power of two: see :mod:`tlm.collectives.rdh`)."""
    per = system.chips_per_node
    out = []
    for label in range(system.chips):
        node, local = divmod(label, per)
        if system.torus is not None:
            coord = []
            for k in system.torus.shape:
                local, digit = divmod(local, k)
                coord.append(gray(digit) if k & (k - 1) == 0 else digit)
            local = system.torus.node(tuple(coord))
        out.append(node * per + local)
    return out
