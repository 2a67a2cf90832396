"""Outputs must be known after reset: a bit at X or Z fails the bench, naming the signal.

Icarus is four-state: a register the reset does not set starts at X when the design is built
without initial values (``verif.mutate.yosys.NO_INIT``, ``tests/test_verif_reset.py``), and
an X reaching a port shows here instead of as a conversion error deep in a decoder.
"""

from __future__ import annotations

__all__ = ["NotKnown", "known"]


class NotKnown(AssertionError):
    """An output read after reset had a bit that is not 0 or 1."""


def known(value, name: str, cycle: int):
    """``value`` (a cocotb ``LogicArray`` or ``Logic``) when every bit is 0 or 1.

    Raises
    ------
    NotKnown
        Naming ``name``, the cycle after reset and the value, e.g.
        ``cycle 0: status is XXXX0000 after reset (X or Z)``.
    """
    if not getattr(value, "is_resolvable", True):
        raise NotKnown(f"cycle {cycle}: {name} is {value} after reset (X or Z)")
    return value
