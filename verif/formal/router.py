"""Properties of one torus router (:class:`hdl.link.router.Router`) at any position of its
torus: the credit counters, and the order of the flits in each link input VC.

The router's coordinate is a free constant (any position of the torus at once). Dimension 0 is
looped back on itself, as on a ring of one node: what the router sends on ``x+`` arrives at its
own ``x-`` input and the credits come back the same way, so both ends of those links are the
real RTL. The other links and the local node are free inputs (a neighbour may misuse the link
protocol: the router must count that, not break), and every credit they return is free.
"""

from __future__ import annotations

from amaranth.hdl import Array, Assert, Assume, Cover, Elaboratable, Module, Signal
from amaranth.lib import data

from hdl.link.flit import closed_kind, flit_layout
from hdl.link.router import Router
from tlm.link.config import LinkConfig
from tlm.link.router import EJECT_SLOTS

from .harness import AnyConst, AnySeq, internal, no_reset

__all__ = ["FORMAL_CONFIG", "RouterCredits", "RouterVcOrder", "LOOPED"]

#: The router the proofs check: a 4x4 torus with the default 2 VCs of 4 flits; the flit is cut
#: to the fields (17 bits, 3-bit coordinates so that a destination can lie outside the torus,
#: no sequence number) and the drop counters to 4 bits, which the credit and buffer logic does
#: not depend on.
FORMAL_CONFIG = LinkConfig(
    (4, 4),
    vcs=2,
    depth=4,
    width=17,
    coord_bits=3,
    len_bits=2,
    seq_bits=0,
    inject_depth=4,
    counter_bits=4,
)

#: Link ports looped back: output port -> the input port its flits arrive at.
LOOPED = {1: 2, 2: 1}


class _RouterHarness(Elaboratable):
    """A router with dimension 0 looped back and everything else free; subclasses add the
    properties in :meth:`properties`."""

    def __init__(self, cfg: LinkConfig = FORMAL_CONFIG, router=Router):
        if not isinstance(cfg, LinkConfig):
            raise TypeError(f"cfg must be a LinkConfig, not {cfg!r}")
        self.cfg, self.router = cfg, router

    def elaborate(self, platform):
        cfg = self.cfg
        m = Module()
        no_reset(m)
        dut = self.router(cfg)
        dut._MustUse__silence = True  # its elaborated body is the submodule
        body = dut.elaborate(platform)  # elaborated here, so that its signals can be named
        m.submodules.dut = body
        coord = AnyConst(len(dut.coord))
        m.d.comb += dut.coord.eq(coord)
        for d, k in enumerate(cfg.shape):
            m.d.comb += Assume(coord[d * cfg.coord_bits :][: cfg.coord_bits] < k)
        m.d.comb += [
            dut.inject.valid.eq(AnySeq(1)),
            dut.inject.payload.eq(AnySeq(cfg.width)),
            dut.eject.ready.eq(AnySeq(1)),
        ]
        for p in range(1, cfg.ports):
            i_link, o_link = dut.i_links[p - 1], dut.o_links[p - 1]
            if p in LOOPED:
                back = dut.i_links[LOOPED[p] - 1]
                m.d.comb += [
                    back.valid.eq(o_link.valid),
                    back.flit.eq(o_link.flit),
                    o_link.credit.eq(back.credit),
                ]
            else:
                m.d.comb += [
                    i_link.valid.eq(AnySeq(1)),
                    i_link.flit.eq(AnySeq(cfg.width)),
                    o_link.credit.eq(AnySeq(cfg.vcs)),
                ]
        self.properties(m, dut, body)
        return m

    def properties(self, m, dut, body):
        raise NotImplementedError


class RouterCredits(_RouterHarness):
    """Every output credit counter stays within ``0..depth``, and its flag ``has_credit`` (a
    register the requests read) says whether it is 0; the counter still holds the credit
    that last cycle's grant (in the grant register) spent. On a looped link credits are
    conserved: credits + the flit on the wire + the flits in the receiving VC's buffer =
    ``depth`` (a credit on its way back is that of a flit leaving the buffer this cycle,
    still counted there), and neither end ever counts a misuse (a flit without a credit, a
    credit not owed). The ejection queue: its credits + the flits it holds = its two slots,
    the second slot is used only behind the first, and a grant to it had a credit. Covers:
    each looped VC runs out of credits, and fills its buffer; the ejection queue fills."""

    def properties(self, m, dut, body):
        cfg = self.cfg
        layout = flit_layout(cfg.fmt)
        bits = (cfg.depth - 1).bit_length()
        eject_credits = internal(body, "eject_credits")
        second = internal(body, "eject_second_valid")
        m.d.comb += [
            Assert(eject_credits + dut.eject.valid + second == EJECT_SLOTS),
            Assert(~second | dut.eject.valid),
            Assert(~internal(body, "eject_spent") | (eject_credits != 0)),
            Cover(second),
        ]
        for o in range(1, cfg.ports):
            for vc in range(cfg.vcs):
                credits = internal(body, f"credit{o}_vc{vc}")
                has_credit = internal(body, f"has_credit{o}_vc{vc}")
                spent = internal(body, f"spent{o}_vc{vc}")
                m.d.comb += [
                    Assert(credits <= cfg.depth),
                    Assert(has_credit == (credits != 0)),
                    Assert(~spent | (credits != 0)),
                ]
                if o not in LOOPED:
                    continue
                p = LOOPED[o]
                o_link, i_link = dut.o_links[o - 1], dut.i_links[p - 1]
                on_wire = o_link.valid & (data.View(layout, o_link.flit).vc == vc)
                rd = internal(body, f"in{p}_vc{vc}_rd")
                wr = internal(body, f"in{p}_vc{vc}_wr")
                held = Signal(bits + 2, name=f"held{p}_vc{vc}")
                m.d.comb += held.eq((wr - rd)[: bits + 1])
                total = credits + on_wire + held
                m.d.comb += [
                    Assert(total == cfg.depth),
                    Assert(~i_link.credit[vc] | (held != 0)),
                    Assert(~internal(body, f"in{p}_vc{vc}_no_credit")),
                    Assert(~internal(body, f"credit_over{o}_vc{vc}")),
                    Cover(credits == 0),
                    Cover(held == cfg.depth),
                ]


class RouterVcOrder(_RouterHarness):
    """Each flit a looped link input VC takes in leaves its buffer once, in order and unchanged
    (its kind only closed, head to single or body to tail, by a later flit's NO_CREDIT drop);
    nothing leaves that did not come in. One flit, chosen freely, is followed: its index among
    the flits taken in, its bits, and what is at the front when that index leaves.
    Cover: a followed flit that is not the first to come in leaves."""

    def properties(self, m, dut, body):
        cfg = self.cfg
        layout = flit_layout(cfg.fmt)
        bits = (cfg.depth - 1).bit_length()
        count_bits = bits + 3  # indices past the buffer's pointers: an overtaking would show
        for p in LOOPED.values():
            for vc in range(cfg.vcs):
                arrive = internal(body, f"in{p}_vc{vc}_arrive")
                lost = internal(body, f"in{p}_vc{vc}_no_credit")
                rd = internal(body, f"in{p}_vc{vc}_rd")
                wr = internal(body, f"in{p}_vc{vc}_wr")
                taken = arrive & ~lost
                popped = Signal(name=f"popped{p}_vc{vc}")
                m.d.comb += popped.eq(internal(body, "pops")[cfg.requester(p, vc)])
                n_in = Signal(count_bits, name=f"n_in{p}_vc{vc}")
                n_out = Signal(count_bits, name=f"n_out{p}_vc{vc}")
                m.d.sync += [n_in.eq(n_in + taken), n_out.eq(n_out + popped)]
                m.d.comb += [
                    Assert((n_in - n_out)[:count_bits] <= cfg.depth),  # no pop from nothing
                    Assert((n_in - n_out)[: bits + 1] == (wr - rd)[: bits + 1]),
                ]
                follow = AnySeq(1)
                tagged = Signal(name=f"tagged{p}_vc{vc}")
                done = Signal(name=f"done{p}_vc{vc}")
                index = Signal(count_bits, name=f"index{p}_vc{vc}")
                flit = Signal(cfg.width, name=f"flit{p}_vc{vc}")
                incoming = dut.i_links[p - 1].flit
                with m.If(taken & follow & ~tagged):
                    m.d.sync += [tagged.eq(1), index.eq(n_in), flit.eq(incoming)]
                front = data.View(layout, body_head(body, p, vc, cfg))
                kept = data.View(layout, flit)
                ahead = (n_in - n_out)[:count_bits]  # flits in the buffer
                leaves = tagged & ~done & popped & (n_out == index)
                with m.If(leaves):
                    m.d.sync += done.eq(1)
                slot = (rd + (index - n_out))[:bits]
                stored = data.View(layout, body_slot(body, p, vc, cfg, slot))

                def same_at(seen, kept):
                    kind = (seen.kind == kept.kind) | (seen.kind == closed_kind(kept.kind))
                    payload = seen.payload.as_value() == kept.payload.as_value()
                    return kind & payload & (seen.vc == kept.vc)

                same_kind = (front.kind == kept.kind) | (front.kind == closed_kind(kept.kind))
                m.d.comb += [
                    Assert(~leaves | (front.payload.as_value() == kept.payload.as_value())),
                    Assert(~leaves | (front.vc == kept.vc)),
                    Assert(~leaves | same_kind),
                    # it has not been skipped: its index is still ahead of what has left
                    Assert(~tagged | done | ((index - n_out)[:count_bits] < cfg.depth)),
                    Assert(~tagged | done | ((index - n_out)[:count_bits] < ahead)),
                    # ... and its slot holds it (what makes the induction close)
                    Assert(~tagged | done | same_at(stored, kept)),
                    Cover(leaves & (index != 0)),
                ]


def body_slot(body, p, vc, cfg, slot):
    """Storage slot ``slot`` of link input VC ``(p, vc)``."""
    slots = [internal(body, f"in{p}_vc{vc}_e{i}") for i in range(cfg.depth)]
    return Array(slots)[slot] if len(slots) > 1 else slots[0]


def body_head(body, p, vc, cfg):
    """The front flit of link input VC ``(p, vc)``: the slot its read pointer names."""
    bits = (cfg.depth - 1).bit_length()
    return body_slot(body, p, vc, cfg, internal(body, f"in{p}_vc{vc}_rd")[:bits])
