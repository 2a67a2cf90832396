"""The router's drop counters: one saturating counter per :class:`~tlm.link.config.DropKind`.

Built into the router's own module (a helper, not a submodule), as :mod:`hdl.link.vc_fifo`.
A drop is registered in the cycle it happens and counted in the next (``docs/noc.md``,
"Synthesis figures"): the adder tree and the saturating add start from flip-flops, not from
the switch allocation that decides the drops. :class:`tlm.link.router.Router` counts at the
same cycle.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Mux, Signal

from tlm.link.config import DropKind

__all__ = ["count_drops"]


def count_drops(m, counters, events: dict, counter_bits: int):
    """Register ``events[kind]`` (1-bit values) each cycle, and add, the next cycle, the
    number that were 1 to ``counters[kind]``, saturating at ``2**counter_bits - 1``.

    Parameters
    ----------
    m : Module
    counters : View of ArrayLayout
        The router's ``drops`` port, indexed by :class:`DropKind`.
    events : dict of DropKind to list of Value
        What each kind counts this cycle (several may happen in one cycle), registered as
        ``drops_seen_<kind>``.
    counter_bits : int
    """
    top = (1 << counter_bits) - 1
    for kind in DropKind:
        seen = Signal(len(events[kind]), name=f"drops_seen_{kind.name.lower()}")
        m.d.sync += seen.eq(Cat(*events[kind]))
        add = counters[kind] + _add_tree(list(seen))
        total = Signal(len(add), name=f"drops_next_{kind.name.lower()}")  # the adder's width
        m.d.comb += total.eq(add)
        m.d.sync += counters[kind].eq(Mux(total > top, top, total))


def _add_tree(values):
    """Sum of ``values`` added in pairs, so the width grows with the log of their count (a
    running sum would grow a bit per term)."""
    values = list(values)
    while len(values) > 1:
        odd = values[-1:] if len(values) % 2 else []
        values = [a + b for a, b in zip(values[0::2], values[1::2], strict=False)] + odd
    return values[0]
