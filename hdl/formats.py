"""Amaranth shapes and arithmetic for the number formats defined in :mod:`tlm.formats`."""

from __future__ import annotations

from amaranth.hdl import Mux, signed

from tlm.formats import IntFormat

__all__ = ["operand_shape", "acc_shape", "mac"]


def operand_shape(fmt: IntFormat):
    """Shape of one operand (stationary or moving element)."""
    return signed(fmt.bits)


def acc_shape(fmt: IntFormat):
    """Shape of a partial sum and of a result element."""
    return signed(fmt.acc_bits)


def mac(fmt: IntFormat, acc, weight, x, enable):
    """``acc + weight * x`` when ``enable``, else ``acc``: one PE step, wrapping like the TLM."""
    total = acc + weight * x
    return Mux(enable, total[: fmt.acc_bits].as_signed(), acc)
