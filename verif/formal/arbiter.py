"""Round-robin fairness of the router's output arbiter (:class:`hdl.link.arbiter`).

Every requester that keeps asking is granted within ``bound`` cycles, whatever the others do;
with ``bound`` the arbiter's requester count this holds (it is the arbiter's contract), and a
cover shows it is tight: some request waits ``bound - 1`` cycles before its grant, so
``bound - 1`` fails.
"""

from __future__ import annotations

from amaranth.hdl import Assert, Cover, Elaboratable, Module, Mux, Signal

from hdl.link.arbiter import RoundRobinArbiter

from .harness import AnySeq, no_reset

__all__ = ["ArbiterFairness"]


class ArbiterFairness(Elaboratable):
    """Harness: ``count`` free request lines into an arbiter; per requester a count of the
    cycles it has asked without a grant.

    Parameters
    ----------
    count : int
        Requesters (the router's ``LinkConfig.requesters``: 9 on a 4x4 torus, 13 on 4x4x4).
    bound : int
        Cycles within which a request that stays up must be granted (the first one counts).
    arbiter : type
        The arbiter class (a mutant in tests), built as ``arbiter(count)``.
    """

    def __init__(self, count: int, bound: int, arbiter=RoundRobinArbiter):
        for name, value in (("count", count), ("bound", bound)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                self._MustUse__silence = True
                raise ValueError(f"{name} must be a positive integer, not {value!r}")
        self.count, self.bound, self.arbiter = count, bound, arbiter

    def elaborate(self, platform):
        n, bound = self.count, self.bound
        m = Module()
        no_reset(m)
        m.submodules.dut = dut = self.arbiter(n)
        requests = AnySeq(n)
        m.d.comb += dut.requests.eq(requests)
        m.d.comb += Assert(dut.granted == requests.any())
        m.d.comb += Assert((dut.grant & ~requests) == 0)  # only requesters are granted
        m.d.comb += Assert((dut.grant & (dut.grant - 1)) == 0)  # at most one
        for i in range(n):
            waited = Signal(range(bound + 1), name=f"waited{i}")  # cycles asked, not granted
            waiting = requests[i] & ~dut.grant[i]
            with m.If(waiting):
                m.d.sync += waited.eq(Mux(waited == bound, bound, waited + 1))
            with m.Else():
                m.d.sync += waited.eq(0)
            m.d.comb += [
                Assert(~(waiting & (waited >= bound - 1))),
                Cover(requests[i] & dut.grant[i] & (waited == bound - 1)),
            ]
        return m
