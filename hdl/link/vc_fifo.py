"""The buffer of one VC of a link input, with the link's misuse rule (``docs/noc.md``).

Built into the router's own module (a helper, not a submodule), so that the router stays one
flat Verilog module that the torus places as instances.
"""

from __future__ import annotations

from amaranth.hdl import Array, Mux, Signal
from amaranth.lib import data

from .flit import closed_kind

__all__ = ["VcFifo", "read_slot"]


class VcFifo:
    """``depth`` flits of one link input VC: storage without reset, read and write pointers;
    beside each flit, ``aux_width`` bits the router computes from it as it is written (its
    route: the lookahead that takes route compute off the read path).

    Parameters
    ----------
    m : Module
        The router's module, which the logic is added to.
    layout : StructLayout
        The flit layout (:func:`hdl.link.flit.flit_layout`).
    depth : int
        Flits, a power of two.
    name : str
        Prefix of its signals' names.
    aux_width : int
        Bits kept beside each flit (``{name}_a{i}``), 0 for none.

    Attributes
    ----------
    head : Value
        The flit at the front (meaningful while ``nonempty``).
    head_aux : Value
        The bits kept beside it.
    behind, behind_aux : Value
        The flit behind the front and its bits (a second read port: the router's request
        reads it while the front, granted, leaves).
    nonempty : Value
    two : Value
        At least two flits held.
    no_credit : Signal
        1 when a flit arrives to find the buffer full (driven by :meth:`connect`).
    """

    def __init__(self, m, layout, depth: int, name: str, aux_width: int = 0):
        self.m, self.layout, self.depth, self.name = m, layout, depth, name
        self.bits = bits = (depth - 1).bit_length()
        width = layout.size
        self.store = Array(
            Signal(width, name=f"{name}_e{i}", reset_less=True) for i in range(depth)
        )
        self.aux = Array(
            Signal(aux_width, name=f"{name}_a{i}", reset_less=True) for i in range(depth)
        )
        self.rd = Signal(bits + 1, name=f"{name}_rd")
        self.wr = Signal(bits + 1, name=f"{name}_wr")
        self.head = read_slot(self.store, self.rd, bits)
        self.head_aux = read_slot(self.aux, self.rd, bits)
        after = (self.rd + 1)[: bits + 1]
        self.behind = read_slot(self.store, after, bits)
        self.behind_aux = read_slot(self.aux, after, bits)
        self.nonempty = self.rd != self.wr
        self.two = self.nonempty & (after != self.wr)
        self.no_credit = Signal(name=f"{name}_no_credit")

    def _slot(self, pointer, store=None):
        store = self.store if store is None else store
        return store[pointer[: self.bits]] if self.bits else store[0]

    def connect(self, pop, arrive, flit, aux=None):
        """Pop the front flit when ``pop``; write ``flit`` (and ``aux`` beside it) when
        ``arrive``. Returns the signal
        that is 1 when an arriving flit finds the buffer full after this cycle's read: its
        sender had no credit. It is dropped, and the packet it continues ends at the last flit
        the buffer kept (:attr:`tlm.link.flit.FlitKind.closed`)."""
        m = self.m
        m.d.sync += self.rd.eq(self.rd + pop)
        full = ((self.wr - self.rd)[: self.bits + 1] == self.depth) & ~pop
        with m.If(arrive & ~full):
            m.d.sync += [self._slot(self.wr).eq(flit), self.wr.eq(self.wr + 1)]
            if aux is not None:
                m.d.sync += self._slot(self.wr, self.aux).eq(aux)
        lost = self.no_credit
        m.d.comb += lost.eq(arrive & full)
        last = data.View(self.layout, self._slot(self.wr - 1))
        with m.If(lost):
            m.d.sync += last.kind.eq(closed_kind(last.kind))
        return lost


def read_slot(store, pointer, bits: int):
    """``store[pointer mod 2**bits]`` as a tree of two-way multiplexers, one level per pointer
    bit (an ``Array`` read decodes the pointer first: about three times the levels)."""
    items = list(store)
    for b in range(bits):
        items = [Mux(pointer[b], hi, lo) for lo, hi in zip(items[0::2], items[1::2], strict=True)]
    return items[0]
