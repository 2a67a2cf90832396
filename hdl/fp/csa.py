"""Carry-save arithmetic: a product as two numbers whose sum it is, with no carry propagated."""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Signal

from ..arith import words

__all__ = ["carry_save_product", "compress"]


def compress(m: Module, terms, width: int, name: str, until: int = 2):
    """``until`` (or fewer) ``width``-bit values whose sum is the sum of ``terms`` modulo
    ``2**width``: a Wallace tree of 3:2 compressors (full adders side by side), each level two
    gates deep whatever ``width`` is. Added to ``m``; with fewer than ``until`` terms,
    ``terms`` padded with zeros. In the words form (:mod:`hdl.arith`): the sum itself,
    then zeros."""
    terms = list(terms)
    if words() and len(terms) > until:
        total = Signal(width, name=f"{name}_sum")
        m.d.comb += total.eq(sum(terms))
        terms = [total]
    level = 0
    while len(terms) > until:
        nxt = []
        for i in range(0, len(terms) - 2, 3):
            a, b, c = terms[i : i + 3]
            s = Signal(width, name=f"{name}_s{level}_{i // 3}")
            cy = Signal(width, name=f"{name}_c{level}_{i // 3}")
            m.d.comb += [
                s.eq(a ^ b ^ c),
                cy.eq(Cat(Const(0, 1), ((a & b) | (a & c) | (b & c))[: width - 1])),
            ]
            nxt += [s, cy]
        nxt += terms[len(terms) - len(terms) % 3 :]
        terms = nxt
        level += 1
    while len(terms) < until:
        terms.append(Const(0, width))
    return tuple(terms)


def carry_save_product(m: Module, a, b, name: str = "csa", until: int = 2, width=None):
    """``until`` numbers whose sum is ``a * b`` (unsigned, ``width`` bits, by default
    ``len(a) + len(b)``, the sum taken modulo ``2**width``): the partial products
    ``a * b[i] << i`` reduced by :func:`compress`, without the final carry-propagate add.
    Added to ``m``.

    Splitting a multiplier here puts a register between most of its tree (about two gate
    levels per 3:2 level, log1.5 of ``len(b)`` levels) and the rest of it with its final add
    (a parallel-prefix adder).
    """
    width = width or len(a) + len(b)
    if words():  # the product itself, then zeros
        prod = Signal(width, name=f"{name}_prod")
        m.d.comb += prod.eq(a * b)
        return compress(m, [prod], width, name, until)
    partial = []
    for i in range(len(b)):
        pp = Signal(width, name=f"{name}_pp{i}")
        m.d.comb += pp.eq((a & b[i].replicate(len(a))) << i)
        partial.append(pp)
    return compress(m, partial, width, name, until)
