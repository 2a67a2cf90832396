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

__all__ = ["ring_order", "hypercube_order", "gray", "snake"]


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


def _local_ring(system) -> list[int]:
    if system.torus is None:
        return list(range(system.chips_per_node))
    return [system.torus.node(c) for c in snake(system.torus.shape)]


def ring_order(system) -> list[int]:
    """Chip of each ring position: each node's Hamiltonian cycle, node after node."""
    local = _local_ring(system)
    per = system.chips_per_node
    return [n * per + c for n in range(system.nodes) for c in local]


def local_ring(system) -> list[int]:
    """Local chip number of each position of one node's ring."""
    return _local_ring(system)


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
