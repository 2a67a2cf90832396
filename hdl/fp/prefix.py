"""Parallel-prefix forms of the carry chains of an increment and a negation, in word operations."""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Signal, Value

__all__ = ["increment", "negate_if", "prefix"]


def prefix(m: Module, bits, op, name: str, identity: int = 0):
    """``out[i] = op(bits[0], ..., bits[i])`` for an associative bitwise ``op`` of two values
    whose identity bit is ``identity``: a Kogge-Stone prefix, log2 of the width levels of
    ``op``. Added to ``m``.

    Each level is one word-wide ``op`` of the previous level and itself shifted up by the
    span (the vacated bits filled with the identity), so a simulator evaluates a few word
    operations per level, not one per bit; synthesis sees the same levels of two-input gates
    as a bit-by-bit tree."""
    width = len(bits)
    cur = Value.cast(bits)
    span, level = 1, 0
    while span < width:
        fill = Const((1 << span) - 1 if identity else 0, span)
        nxt = Signal(width, name=f"{name}_{level}")
        m.d.comb += nxt.eq(op(cur, Cat(fill, cur[: width - span])))
        cur, span, level = nxt, span * 2, level + 1
    out = Signal(width, name=name)
    m.d.comb += out.eq(cur)
    return out


def increment(m: Module, value, carry_in, name: str):
    """``value + carry_in`` (``carry_in`` one bit), ``len(value) + 1`` bits: bit i flips when
    ``carry_in`` and every bit below it are set. A prefix AND, not an adder's carry chain."""
    # ones[i]: value[:i + 1] all set
    ones = prefix(m, value, lambda a, b: a & b, f"{name}_ones", identity=1)
    below = Cat(Const(1, 1), ones)  # below[i]: value[:i] all set
    out = Signal(len(value) + 1, name=name)
    m.d.comb += out.eq(Cat(value, Const(0, 1)) ^ (below & carry_in.replicate(len(below))))
    return out


def negate_if(m: Module, value, negative, name: str):
    """``-value`` (modulo ``2**len(value)``) when ``negative``, else ``value``: bit i flips when
    ``negative`` and any bit below it is set (two's complement negation inverts the bits above
    the lowest one). A prefix OR, not an adder's carry chain."""
    any_ = prefix(m, value, lambda a, b: a | b, f"{name}_any")  # any_[i]: value[:i + 1] not 0
    below = Cat(Const(0, 1), any_[:-1])
    out = Signal(len(value), name=name)
    m.d.comb += out.eq(value ^ (below & negative.replicate(len(value))))
    return out
