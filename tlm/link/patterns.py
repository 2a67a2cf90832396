"""Synthetic traffic: who sends to whom, and when.

Patterns (destination of a packet from ``src``; a pattern that maps a node to itself sends
nothing from it):

``uniform``
    any other node, uniformly at random;
``transpose``
    coordinates reversed, ``(c0, c1, ..., cn) -> (cn, ..., c1, c0)`` (rings of equal size);
``neighbour``
    one of the ``2 n`` nearest neighbours, at random;
``hotspot``
    node 0 with probability :data:`HOTSPOT_FRACTION`, else uniform;
``all-to-all``
    every other node in turn, ``src + 1, src + 2, ...`` (each node starting at a different
    offset, as an all-to-all exchange schedules it).

Sources are Bernoulli: at ``rate`` flits per cycle per node, a node creates a packet of
``length`` flits in a cycle with probability ``rate / length`` into an unbounded source queue;
its packets take the lanes (:mod:`tlm.link.routing`) in turn.
"""

from __future__ import annotations

import numpy as np

from .topology import Torus

__all__ = ["PATTERNS", "HOTSPOT_FRACTION", "Destinations"]

PATTERNS = ("uniform", "transpose", "neighbour", "hotspot", "all-to-all")

#: Share of packets that go to the hot spot (node 0) in ``hotspot`` traffic.
HOTSPOT_FRACTION = 0.2


class Destinations:
    """Draws destinations of ``pattern`` on ``torus`` from ``rng``.

    Examples
    --------
    >>> d = Destinations("transpose", Torus((4, 4)), np.random.default_rng(0))
    >>> d.next(1), d.next(5)   # (1, 0) -> (0, 1); (1, 1) sends nothing
    (4, None)
    """

    def __init__(self, pattern: str, torus: Torus, rng: np.random.Generator):
        if pattern not in PATTERNS:
            raise ValueError(f"pattern must be one of {', '.join(PATTERNS)}, not {pattern!r}")
        if pattern == "transpose" and torus.shape != torus.shape[::-1]:
            raise ValueError(f"transpose needs a symmetric shape, not {torus.shape!r}")
        self.pattern = pattern
        self.torus = torus
        self.rng = rng
        n = torus.nodes
        self._turn = list(range(n))  # all-to-all: offset of each node's next destination

    def next(self, src: int) -> int | None:
        t, n = self.torus, self.torus.nodes
        p = self.pattern
        if p == "uniform" or (p == "hotspot" and self.rng.random() >= HOTSPOT_FRACTION):
            dst = int(self.rng.integers(n - 1))
            return dst + (dst >= src)
        if p == "hotspot":
            return None if src == 0 else 0
        if p == "transpose":
            dst = t.node(t.coord(src)[::-1])
            return None if dst == src else dst
        if p == "neighbour":
            port = 1 + int(self.rng.integers(2 * t.dims))
            return t.node(t.neighbour(t.coord(src), port))
        self._turn[src] = self._turn[src] % (n - 1) + 1
        return (src + self._turn[src]) % n

    def draw(self, srcs) -> np.ndarray:
        """Destinations of packets from ``srcs`` in turn, ``-1`` where :meth:`next` gives
        ``None``: equal to ``[self.next(s) for s in srcs]``, with the generator left in the same
        state (``tests/test_tlm_link_patterns.py`` checks both for every pattern).

        ``uniform`` and ``neighbour`` draw one array of bounded integers, which numpy makes
        from the generator exactly as the same draws one at a time; ``transpose`` draws nothing;
        ``hotspot`` (whose draws interleave) and ``all-to-all`` call :meth:`next` for each.

        Examples
        --------
        >>> d = Destinations("transpose", Torus((4, 4)), np.random.default_rng(0))
        >>> d.draw([1, 5, 1]).tolist()
        [4, -1, 4]
        """
        srcs = np.asarray(srcs, np.int64).reshape(-1)
        t, p = self.torus, self.pattern
        if p == "uniform":
            dst = self.rng.integers(t.nodes - 1, size=srcs.size)
            return dst + (dst >= srcs)
        if p == "neighbour":
            ports = 1 + self.rng.integers(2 * t.dims, size=srcs.size)
            table = np.array(
                [[0] + [t.node(t.neighbour(c, q)) for q in range(1, t.ports)] for c in t.coords()]
            )
            return table[srcs, ports].astype(np.int64)
        if p == "transpose":
            table = np.array([-1 if (d := self.next(s)) is None else d for s in range(t.nodes)])
            return table[srcs].astype(np.int64)
        out = [self.next(s) for s in srcs.tolist()]
        return np.array([-1 if d is None else d for d in out], np.int64)
