"""Torus coordinates, node numbering and router ports, defined once for RTL, TLM and benches.

A k-ary n-cube ``shape = (k0, k1, ...)``: node ``(c0, c1, ...)`` has number
``c0 + k0 * (c1 + k1 * (c2 + ...))`` (dimension 0 fastest). Each router has ``1 + 2 n`` ports:

* port 0: the local node (injection in, ejection out);
* port ``1 + 2 d``: the link to the neighbour at ``+1`` in dimension ``d`` (with wrap-around);
* port ``2 + 2 d``: the link to the neighbour at ``-1`` in dimension ``d``.

Links are named by the side they face, in both directions: what router ``a`` sends on its port
``1 + 2 d`` arrives at its ``+d`` neighbour's port ``2 + 2 d``, and that neighbour's credits for
it go back the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import product

__all__ = ["Torus", "LOCAL", "port_name", "parse_shape"]

LOCAL = 0


def port_name(port: int) -> str:
    """``local``, ``x+``, ``x-``, ``y+`` ... for a port number."""
    if port == LOCAL:
        return "local"
    d, side = divmod(port - 1, 2)
    return "xyzw"[d] + "+-"[side]


def parse_shape(text) -> tuple[int, ...]:
    """``"4x4x4"`` or ``(4, 4, 4)`` -> ``(4, 4, 4)``, checked by :class:`Torus`."""
    if isinstance(text, str):
        try:
            shape = tuple(int(v) for v in text.lower().split("x"))
        except ValueError:
            raise ValueError(f"shape must look like 4x4 or 4x4x4, not {text!r}") from None
    else:
        shape = tuple(text)
    return Torus(shape).shape


@dataclass(frozen=True)
class Torus:
    """A k-ary n-cube: coordinates, node numbers, neighbours and minimal hop counts.

    Parameters
    ----------
    shape : tuple of int
        Ring size per dimension, 1 to 4 dimensions of 2..16 nodes each.

    Examples
    --------
    >>> t = Torus((4, 4))
    >>> t.nodes, t.ports, t.coord(6), t.node((2, 1))
    (16, 5, (2, 1), 6)
    >>> t.neighbour((3, 1), 1), port_name(1)   # port 1 faces +x, wrapping 3 -> 0
    ((0, 1), 'x+')
    """

    shape: tuple[int, ...]

    def __post_init__(self):
        shape = self.shape
        ok = isinstance(shape, tuple) and 1 <= len(shape) <= 4
        ok = ok and all(not isinstance(k, bool) and isinstance(k, int) for k in shape)
        if not ok or not all(2 <= k <= 16 for k in shape):
            raise ValueError(
                f"shape must be a tuple of 1 to 4 ring sizes, each 2..16, not {shape!r}"
            )

    @property
    def dims(self) -> int:
        return len(self.shape)

    @property
    def nodes(self) -> int:
        n = 1
        for k in self.shape:
            n *= k
        return n

    @property
    def ports(self) -> int:
        return 1 + 2 * self.dims

    @property
    def name(self) -> str:
        return "x".join(str(k) for k in self.shape)

    def coord(self, node: int) -> tuple[int, ...]:
        out = []
        for k in self.shape:
            node, c = divmod(node, k)
            out.append(c)
        return tuple(out)

    def node(self, coord) -> int:
        n = 0
        for k, c in zip(reversed(self.shape), reversed(tuple(coord)), strict=True):
            n = n * k + c
        return n

    def node_of_field(self, field: int, coord_bits: int) -> int:
        """Node number of a packed coordinate field (dimension 0 in the low bits)."""
        mask = (1 << coord_bits) - 1
        return self.node(tuple((field >> (d * coord_bits)) & mask for d in range(self.dims)))

    def coords(self):
        """Every coordinate, in node order."""
        return [self.coord(i) for i in range(self.nodes)]

    def contains(self, coord) -> bool:
        return all(0 <= c < k for c, k in zip(coord, self.shape, strict=True))

    def neighbour(self, coord, port: int) -> tuple[int, ...]:
        """The coordinate a link port leads to."""
        if not 1 <= port < self.ports:
            raise ValueError(f"port must be a link port 1..{self.ports - 1}, not {port!r}")
        d, side = divmod(port - 1, 2)
        c = list(coord)
        c[d] = (c[d] + (1 if side == 0 else -1)) % self.shape[d]
        return tuple(c)

    @staticmethod
    def facing(port: int) -> int:
        """The port of the neighbour that a link port connects to (``x+`` <-> ``x-``)."""
        return port + 1 if port % 2 else port - 1

    def links(self):
        """Every directed link as ``(node, port, next node, next port)``."""
        for node in range(self.nodes):
            c = self.coord(node)
            for port in range(1, self.ports):
                yield node, port, self.node(self.neighbour(c, port)), self.facing(port)

    def hops(self, src, dst) -> int:
        """Minimal hop count (what dimension-order routing takes)."""
        pairs = zip(src, dst, self.shape, strict=True)
        return sum(min((t - s) % k, (s - t) % k) for s, t, k in pairs)

    def mean_hops(self) -> float:
        """Mean hop count over all pairs of distinct nodes (uniform random traffic)."""
        total = sum(self.hops(a, b) for a, b in product(self.coords(), repeat=2))
        return total / (self.nodes * (self.nodes - 1))
