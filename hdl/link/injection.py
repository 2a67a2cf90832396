"""The injection buffer and its checker: a packet becomes readable only once its tail has been
checked; a malformed one is rolled back and counted (``docs/noc.md``, "Bad input").

Built into the router's own module (a helper, not a submodule), as :mod:`hdl.link.vc_fifo`.
The rules are those of ``tlm.link.router.Router._check_injected``, register for register.
"""

from __future__ import annotations

from amaranth.hdl import Array, Signal
from amaranth.lib import data

from tlm.link.config import MALFORMED, DropKind, LinkConfig

from .flit import FlitKind
from .vc_fifo import read_slot

__all__ = ["InjectionChecker"]


class InjectionChecker:
    """The injection buffer (``inject_depth`` flits: read, commit and write pointers) written
    through the checker.

    Parameters
    ----------
    m : Module
        The router's module.
    cfg : LinkConfig
    layout : StructLayout
        The flit layout.
    inject : stream interface
        The router's ``inject`` port (its ``ready`` is driven here).
    bad_dest : Value
        1 when the offered flit's destination lies outside the torus.
    aux : Value, optional
        Bits computed from the offered flit, kept beside it (its route, a lookahead).

    Attributes
    ----------
    head, nonempty : Value
        The front flit of the committed packets, and whether there is one.
    head_aux : Value
        The bits kept beside the front flit.
    behind, behind_aux, two : Value
        The committed flit behind the front, its bits, and whether there is one (a second
        read port, as :class:`~hdl.link.vc_fifo.VcFifo`'s).
    drops : dict of DropKind to Signal
        1 in a cycle a packet is dropped for that reason (``MALFORMED`` kinds).
    rollback : Signal
        1 when a head came before the open packet's tail (that packet is dropped).
    """

    def __init__(self, m, cfg: LinkConfig, layout, inject, bad_dest, aux=None):
        self.m, self.cfg, self.layout, self.inject = m, cfg, layout, inject
        self.bits = bits = (cfg.inject_depth - 1).bit_length()
        self.store = Array(
            Signal(cfg.width, name=f"inj_e{i}", reset_less=True) for i in range(cfg.inject_depth)
        )
        self.rd = Signal(bits + 1, name="inj_rd")
        self.commit = Signal(bits + 1, name="inj_commit")
        self.wr = Signal(bits + 1, name="inj_wr")
        self.head = read_slot(self.store, self.rd, bits)
        self._aux = aux
        aux_width = 0 if aux is None else len(aux)
        self.aux_store = Array(
            Signal(aux_width, name=f"inj_a{i}", reset_less=True) for i in range(cfg.inject_depth)
        )
        self.head_aux = read_slot(self.aux_store, self.rd, bits)
        after = (self.rd + 1)[: bits + 1]
        self.behind = read_slot(self.store, after, bits)
        self.behind_aux = read_slot(self.aux_store, after, bits)
        self.nonempty = self.rd != self.commit
        self.two = self.nonempty & (after != self.commit)
        self.drops = {kind: Signal(name=f"inj_{kind.name.lower()}") for kind in MALFORMED}
        self.rollback = Signal()
        self._bad_dest = bad_dest

    def _write(self, at):
        slot = at[: self.bits] if self.bits else 0
        writes = [self.store[slot].eq(self.inject.payload)]
        if self._aux is not None:
            writes.append(self.aux_store[slot].eq(self._aux))
        return writes

    def connect(self, pop):
        """The checker's logic; ``pop`` removes the front flit."""
        m, cfg, inject = self.m, self.cfg, self.inject
        rd, commit, wr, inc = self.rd, self.commit, self.wr, self.drops
        occupancy = (wr - rd)[: self.bits + 1]
        m.d.comb += inject.ready.eq(occupancy != cfg.inject_depth)
        accept = inject.valid & inject.ready
        m.d.sync += rd.eq(rd + pop)
        flit = data.View(self.layout, inject.payload)
        max_length = cfg.fmt.max_length
        count_bits = (max_length + 1).bit_length()  # up to one flit past the longest
        is_open = Signal()  # a packet is being written
        count = Signal(count_bits)  # its flits so far
        length = Signal(count_bits)  # the length its head gives
        seen = (count + 1)[:count_bits]  # ... with this one: at most max_length + 1, it fits
        pkt_bad_dest = Signal()
        over = Signal()  # a body came where the tail should have
        head_length = flit.payload.head.length + 1
        with m.If(accept):
            with m.Switch(flit.kind):
                with m.Case(FlitKind.HEAD, FlitKind.SINGLE):
                    m.d.comb += self.rollback.eq(is_open)
                    m.d.sync += wr.eq(commit)  # rolls back an unfinished packet
                    with m.If(flit.kind == FlitKind.SINGLE):
                        m.d.sync += is_open.eq(0)
                        with m.If(self._bad_dest):
                            m.d.comb += inc[DropKind.BAD_DEST].eq(1)
                        with m.Elif(head_length != 1):
                            m.d.comb += inc[DropKind.BAD_LENGTH].eq(1)
                        with m.Else():
                            m.d.sync += self._write(commit)
                            m.d.sync += [wr.eq(commit + 1), commit.eq(commit + 1)]
                    with m.Else():
                        m.d.sync += [
                            is_open.eq(1),
                            count.eq(1),
                            length.eq(head_length),
                            pkt_bad_dest.eq(self._bad_dest),
                            over.eq(0),
                        ]
                        with m.If(~self._bad_dest):
                            m.d.sync += self._write(commit)
                            m.d.sync += wr.eq(commit + 1)
                with m.Case(FlitKind.BODY):
                    with m.If(~is_open):
                        m.d.comb += inc[DropKind.ORPHAN].eq(1)
                    with m.Elif(~over):
                        m.d.sync += count.eq(seen)
                        with m.If(seen >= length):
                            m.d.sync += over.eq(1)
                        with m.Elif(~pkt_bad_dest):
                            m.d.sync += self._write(wr)
                            m.d.sync += wr.eq(wr + 1)
                with m.Case(FlitKind.TAIL):
                    with m.If(~is_open):
                        m.d.comb += inc[DropKind.ORPHAN].eq(1)
                    with m.Else():
                        m.d.sync += is_open.eq(0)
                        with m.If(pkt_bad_dest):
                            m.d.comb += inc[DropKind.BAD_DEST].eq(1)
                        with m.Elif(over | (seen != length)):
                            m.d.comb += inc[DropKind.BAD_LENGTH].eq(1)
                            m.d.sync += wr.eq(commit)
                        with m.Else():
                            m.d.sync += self._write(wr)
                            m.d.sync += [wr.eq(wr + 1), commit.eq(wr + 1)]
