"""Round-robin arbiter: one output port's switch and VC allocation (``docs/noc.md``)."""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["RoundRobinArbiter"]


class RoundRobinArbiter(wiring.Component):
    """Grants one of ``count`` requesters per cycle: the first asking at or after the one
    after the last granted, cyclically (``tlm.link.router.Router._arbitrate``).

    Ports
    -----
    ``requests`` (in)
        One bit per requester.
    ``grant`` (out, combinational)
        One-hot: the requester granted this cycle (0 when none asks).
    ``granted`` (out)
        Any grant this cycle.

    The pointer moves past the granted requester at the end of the cycle.

    Parameters
    ----------
    count : int
        Requesters, at least 1.
    """

    def __init__(self, count: int):
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            self._MustUse__silence = True
            raise TypeError(f"count must be a positive integer, not {count!r}")
        self.count = count
        super().__init__({"requests": In(count), "grant": Out(count), "granted": Out(1)})

    def elaborate(self, platform):
        n = self.count
        m = Module()
        pointer = Signal(range(n))  # the first requester to consider
        ones = Const((1 << n) - 1, n)
        at_or_after = Signal(n)
        m.d.comb += at_or_after.eq(self.requests & (ones << pointer)[:n])
        pick_from = Signal(n)
        m.d.comb += pick_from.eq(Mux(at_or_after.any(), at_or_after, self.requests))
        m.d.comb += [
            self.grant.eq(pick_from & (~pick_from + 1)[:n]),  # its lowest set bit
            self.granted.eq(self.requests.any()),
        ]
        index = _encode(self.grant, n)
        with m.If(self.granted):
            m.d.sync += pointer.eq(Mux(index == n - 1, 0, index + 1))
        return m


def _encode(onehot, n):
    """Index of the set bit of a one-hot vector (0 if none)."""
    bits = max(1, (n - 1).bit_length())
    return Cat(*[Cat(*[onehot[r] for r in range(n) if r >> b & 1]).any() for b in range(bits)])
