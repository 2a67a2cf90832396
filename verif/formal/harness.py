"""Pieces every formal harness shares: free inputs, the reset assumption, internal signals."""

from __future__ import annotations

from amaranth.hdl import Assume, ResetSignal, Signal
from amaranth.hdl._ast import AnyConst, AnySeq  # not re-exported by amaranth.hdl in 0.5

__all__ = ["AnyConst", "AnySeq", "no_reset", "internal"]


def no_reset(m):
    """Assume the ``sync`` domain's reset stays low: every run starts from the initial values
    (the solver's step 0) and nothing resets the design later."""
    m.d.comb += Assume(~ResetSignal())


def internal(module, name: str) -> Signal:
    """The signal called ``name`` that ``module`` (an elaborated ``Module``) drives.

    The RTL keeps its state in local signals (credit counters, buffer pointers); a harness
    reads them by the names the RTL gives them, so that properties need no RTL change. Relies
    on ``Module._driving`` (Amaranth 0.5); a renamed signal raises here, not a vacuous proof.
    """
    found = [s for s in module._driving.keys() if s.name == name]
    if len(found) != 1:
        raise LookupError(f"{len(found)} signals named {name!r} driven in {module!r}")
    return found[0]
