"""Parallel-prefix forms of the carry chains of an increment and a negation (or, in the words
form of :mod:`hdl.arith`, the word operations they compute)."""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal

from ..arith import words

__all__ = ["increment", "negate_if", "prefix"]


def prefix(m: Module, bits, op, name: str):
    """``out[i] = op(bits[0], ..., bits[i])`` for an associative ``op`` of two values: a
    Sklansky prefix tree, log2 of the width levels of ``op``. Added to ``m``."""
    cur = [bits[i] for i in range(len(bits))]
    span = 1
    while span < len(cur):
        nxt = list(cur)
        for i in range(len(cur)):
            if i & span:  # the upper half of a block of 2 * span takes the lower half's last
                nxt[i] = op(cur[(i & ~(2 * span - 1)) + span - 1], cur[i])
        cur, span = nxt, span * 2
    out = Signal(len(cur), name=name)
    m.d.comb += out.eq(Cat(*cur))
    return out


def increment(m: Module, value, carry_in, name: str):
    """``value + carry_in`` (``carry_in`` one bit), ``len(value) + 1`` bits: bit i flips when
    ``carry_in`` and every bit below it are set. A prefix AND, not an adder's carry chain."""
    if words():
        out = Signal(len(value) + 1, name=name)
        m.d.comb += out.eq(value + carry_in)
        return out
    ones = prefix(m, value, lambda a, b: a & b, f"{name}_ones")  # ones[i]: value[:i + 1] all set
    below = Cat(Const(1, 1), ones)  # below[i]: value[:i] all set
    out = Signal(len(value) + 1, name=name)
    m.d.comb += out.eq(Cat(value, Const(0, 1)) ^ (below & carry_in.replicate(len(below))))
    return out


def negate_if(m: Module, value, negative, name: str):
    """``-value`` (modulo ``2**len(value)``) when ``negative``, else ``value``: bit i flips when
    ``negative`` and any bit below it is set (two's complement negation inverts the bits above
    the lowest one). A prefix OR, not an adder's carry chain."""
    if words():
        out = Signal(len(value), name=name)
        m.d.comb += out.eq(Mux(negative, -value, value))
        return out
    any_ = prefix(m, value, lambda a, b: a | b, f"{name}_any")  # any_[i]: value[:i + 1] not 0
    below = Cat(Const(0, 1), any_[:-1])
    out = Signal(len(value), name=name)
    m.d.comb += out.eq(value ^ (below & negative.replicate(len(value))))
    return out
