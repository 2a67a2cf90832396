"""Amaranth shapes and arithmetic for the number formats defined in :mod:`tlm.formats`."""

from __future__ import annotations

from amaranth.hdl import Mux, signed, unsigned

__all__ = ["operand_shape", "acc_shape", "mac"]


def operand_shape(fmt):
    """Shape of one operand (stationary or moving element): a signed integer, or the raw
    bits of a floating-point value in its container (32 bits for TF32)."""
    return signed(fmt.bits) if fmt.kind == "int" else unsigned(fmt.storage_bits)


def acc_shape(fmt):
    """Shape of a partial sum and of a result element: a signed integer, or binary32 bits."""
    return signed(fmt.acc_bits) if fmt.kind == "int" else unsigned(32)


def mac(m, fmt, acc, weight, x, enable):
    """``acc + weight * x`` when ``enable``, else ``acc``: one PE step.

    Integers wrap like the TLM's accumulator; floating point follows the numerics contract
    (``docs/numerics.md``) through :class:`hdl.fp.FloatMac`, added to ``m``.
    """
    if fmt.kind == "int":
        total = acc + weight * x
        return Mux(enable, total[: fmt.acc_bits].as_signed(), acc)
    from .fp import FloatMac

    m.submodules.mac = unit = FloatMac(fmt, fmt)
    m.d.comb += [unit.w.eq(weight), unit.x.eq(x), unit.en.eq(enable), unit.acc_in.eq(acc)]
    return unit.acc_out
