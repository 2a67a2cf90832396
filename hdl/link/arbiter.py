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
    ``last`` (out, registered)
        The grant of the previous cycle (the router's grant register: what traverses now).

    The priority is kept as a mask, ``after``: the requesters after the last granted (all of
    them at reset); it is formed from ``last`` at the start of a cycle, so that nothing after
    the grant is computed in the grant's cycle but the register. The grant is the lowest
    asking requester in the mask, else the lowest asking; both are found by parallel prefix
    ORs, in about ``log2(count)`` levels each, side by side (a pointer shifting a mask, then a
    carry chain, took twice the levels).

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
        super().__init__(
            {"requests": In(count), "grant": Out(count), "granted": Out(1), "last": Out(count)}
        )

    def elaborate(self, platform):
        n = self.count
        m = Module()
        kept = Signal(n, init=(1 << n) - 1)  # the mask before the last grant, if none since
        # the requesters after the last granted; after the last requester none is after it:
        # the lowest asking wins, as from the first
        after = Signal(n)
        m.d.comb += after.eq(Mux(self.last.any(), _below(self.last), kept))
        high = Signal(n)
        m.d.comb += high.eq(self.requests & after)
        m.d.comb += [
            self.grant.eq(Mux(high.any(), _lowest(high), _lowest(self.requests))),
            self.granted.eq(self.requests.any()),
        ]
        m.d.sync += [self.last.eq(self.grant), kept.eq(after)]
        return m


def _below(bits):
    """Bit ``i`` is 1 when some bit below ``i`` is 1 (an exclusive prefix OR, Kogge-Stone)."""
    n = len(bits)
    prefix = [bits[i] for i in range(n)]
    step = 1
    while step < n:
        prefix = [prefix[i] | prefix[i - step] if i >= step else prefix[i] for i in range(n)]
        step *= 2
    return Cat(Const(0, 1), *prefix[: n - 1])


def _lowest(bits):
    """The lowest set bit of ``bits`` alone (0 if none)."""
    return bits & ~_below(bits)
