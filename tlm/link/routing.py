"""Dimension-order routing on a torus with a dateline rule for virtual channels.

Defined once; the RTL router (:mod:`hdl.link.router`) computes the same function in logic and a
test checks the two agree on every (router, source, destination) of a small torus.

**Route.** Correct dimension 0 first, then 1, and so on. In each dimension take the shorter way
round the ring; at exactly half way (even ``k``) go ``+``. At the destination, eject (port 0).

**Dateline.** Each ring has a dateline on its wrap-around links (``k-1 -> 0`` going ``+``,
``0 -> k-1`` going ``-``). A packet travels a dimension in VC class 0 until it takes the
wrap-around link, and in class 1 from that link on; it starts each dimension in class 0 again.
Under dimension-order routing the packet entered dimension ``d`` at its source's coordinate
``s`` (earlier dimensions change only other coordinates), so the class of the hop leaving
coordinate ``c`` is, going ``+``: ``c == k - 1 or c < s``; going ``-``: ``c == 0 or c > s``.
Class 0 never uses a wrap-around link and class 1 never reaches one again (a minimal path is
shorter than the ring), so neither class has a cyclic channel dependency: no deadlock.

**VCs.** With ``V`` virtual channels (a power of two, at least 2) a packet keeps a *lane*
``l = vc mod V/2`` chosen at injection; on each link it uses VC ``l + (V/2) * class``. Packets of
one (source, destination, lane) therefore take the same channels and stay in order.
"""

from __future__ import annotations

from .topology import LOCAL

__all__ = ["route", "lane", "out_vc", "dateline_class"]


def dateline_class(c: int, s: int, k: int, plus: bool) -> int:
    """VC class (0 or 1) of the hop leaving coordinate ``c`` of a ring of ``k`` nodes, for a
    packet that entered the ring at ``s``, going ``+`` when ``plus``."""
    if plus:
        return int(c == k - 1 or c < s)
    return int(c == 0 or c > s)


def route(shape, here, src, dst) -> tuple[int, int]:
    """``(output port, VC class)`` of a head at router ``here``; ``(LOCAL, 0)`` to eject.

    Examples
    --------
    >>> route((4, 4), (0, 0), (0, 0), (3, 1))   # x: 0 -> 3 is one hop going -, the wrap link
    (2, 1)
    >>> route((4, 4), (3, 0), (0, 0), (3, 1))   # x done; y: 0 -> 1 going +
    (3, 0)
    >>> route((4, 4), (3, 1), (0, 0), (3, 1))
    (0, 0)
    """
    for d, k in enumerate(shape):
        c, t = here[d], dst[d]
        if c != t:
            plus = (t - c) % k <= k // 2
            return 1 + 2 * d + (0 if plus else 1), dateline_class(c, src[d], k, plus)
    return LOCAL, 0


# lane() and out_vc() are plain arithmetic so that the compiled engine runs these very
# functions (numba.njit of them, tlm.link.compiled) and the RTL builds its logic from out_vc
# (hdl.link.route: Amaranth values support the same operators).
def lane(vc: int, vcs: int) -> int:
    """The lane of a packet that travels in VC ``vc`` of ``vcs`` (its VC in class 0).

    Examples
    --------
    >>> [lane(vc, 4) for vc in range(4)]
    [0, 1, 0, 1]
    """
    return vc & (vcs // 2 - 1)  # vc mod vcs/2: vcs is a power of two, the lane its low bits


def out_vc(lane: int, cls: int, vcs: int) -> int:
    """The VC a packet of ``lane`` uses in dateline class ``cls`` with ``vcs`` virtual
    channels; the ejection port's "VC" is the lane (:func:`route` gives it class 0).

    Examples
    --------
    >>> out_vc(1, 0, 4), out_vc(1, 1, 4)
    (1, 3)
    """
    return lane + cls * (vcs // 2)
