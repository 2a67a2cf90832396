"""Torus router: wormhole, credit flow control, dimension-order routing with dateline VCs.

The cycle-exact reference is :class:`tlm.link.router.Router`; its docstring and ``docs/noc.md``
give the pipeline, which this module implements register for register:

* link input FIFOs, one per VC (``depth`` flits, no reset on the storage);
* an injection buffer that commits a packet only once its tail has been checked
  (read, commit and write pointers; a malformed packet rolls the write pointer back);
* per output port one round-robin arbiter over every requester (the injection buffer and
  each link VC), the switch and VC allocation in one step since each packet's output VC is
  fixed by its lane and dateline class (:mod:`tlm.link.routing`);
* output registers for every link and the ejection stream, credit registers for every link
  input, saturating drop counters (:class:`tlm.link.config.DropKind`), also for the link
  protocol's misuse: a flit that finds its VC's FIFO full, a credit not owed.
"""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from tlm.link.config import MALFORMED, DropKind, LinkConfig

from .flit import FlitKind, flit_layout

__all__ = ["Router", "LinkSignature"]


class LinkSignature(wiring.Signature):
    """One direction of a link, seen from the sender: ``valid`` and ``flit`` forward (the flit
    carries its VC), ``credit`` back (one bit per VC: a slot of that VC was freed).

    Parameters
    ----------
    width : int
        Flit width in bits.
    vcs : int
        Virtual channels.
    """

    def __init__(self, width: int, vcs: int):
        self.width, self.vcs = width, vcs
        super().__init__({"valid": Out(1), "flit": Out(width), "credit": In(vcs)})

    def __eq__(self, other):
        return isinstance(other, LinkSignature) and (self.width, self.vcs) == (
            other.width,
            other.vcs,
        )

    def __repr__(self):
        return f"LinkSignature({self.width}, {self.vcs})"


def _rr_pick(m, req, ptr, n):
    """One-hot grant: the first set bit of ``req`` at or after ``ptr``, cyclically."""
    ones = Const((1 << n) - 1, n)
    masked = Signal(n)
    m.d.comb += masked.eq(req & (ones << ptr)[:n])
    pick_from = Signal(n)
    m.d.comb += pick_from.eq(Mux(masked.any(), masked, req))
    grant = Signal(n)
    m.d.comb += grant.eq(pick_from & (~pick_from + 1)[:n])
    return grant


def _encode(onehot, n):
    """Index of the set bit of a one-hot vector (0 if none)."""
    bits = max(1, (n - 1).bit_length())
    return Cat(*[Cat(*[onehot[r] for r in range(n) if r >> b & 1]).any() for b in range(bits)])


class Router(wiring.Component):
    """One router of a ``cfg.shape`` torus; its coordinate is the ``coord`` input.

    Ports
    -----
    ``inject`` (stream in), ``eject`` (stream out)
        The local node's flits. ``eject`` is registered; packets leave it contiguous.
    ``i_links[p - 1]``, ``o_links[p - 1]`` (:class:`LinkSignature`)
        Link port ``p`` (1 ``x+``, 2 ``x-``, ...; :mod:`tlm.link.topology`), in and out.
    ``coord``
        This router's coordinate, ``coord_bits`` per dimension, dimension 0 lowest.
    ``drops``
        Saturating counters, indexed by :class:`~tlm.link.config.DropKind`.

    Parameters
    ----------
    cfg : LinkConfig
    """

    def __init__(self, cfg: LinkConfig):
        if not isinstance(cfg, LinkConfig):
            self._MustUse__silence = True
            raise TypeError(f"cfg must be a LinkConfig, not {cfg!r}")
        self.cfg = cfg
        w, v = cfg.width, cfg.vcs
        links = cfg.ports - 1
        super().__init__(
            {
                "inject": In(stream.Signature(w)),
                "eject": Out(stream.Signature(w)),
                "i_links": In(LinkSignature(w, v)).array(links),
                "o_links": Out(LinkSignature(w, v)).array(links),
                "coord": In(len(cfg.shape) * cfg.coord_bits),
                "drops": Out(data.ArrayLayout(cfg.counter_bits, len(DropKind))),
            }
        )

    def elaborate(self, platform):
        cfg = self.cfg
        fmt = cfg.fmt
        m = Module()
        P, V, R, W = cfg.ports, cfg.vcs, cfg.requesters, cfg.width
        lanes = cfg.lanes
        lane_bits = (lanes - 1).bit_length()
        layout = flit_layout(fmt)
        here = data.View(data.ArrayLayout(fmt.coord_bits, fmt.dims), self.coord)

        # ---- storage: requester 0 = injection buffer, then each VC of each link port -----
        def pointer_fifo(depth, name):
            bits = (depth - 1).bit_length()
            store = Array(Signal(W, name=f"{name}_e{i}", reset_less=True) for i in range(depth))
            return store, bits

        heads = []  # flit at the head of each requester
        nonempty = []
        inj_store, inj_bits = pointer_fifo(cfg.inject_depth, "inj")
        inj_rd = Signal(inj_bits + 1)
        inj_commit = Signal(inj_bits + 1)
        inj_wr = Signal(inj_bits + 1)
        heads.append(inj_store[inj_rd[:inj_bits]] if inj_bits else inj_store[0])
        nonempty.append(inj_rd != inj_commit)
        vc_fifos = []  # (store, rd, wr, bits) per link requester
        for p in range(1, P):
            for vc in range(V):
                store, bits = pointer_fifo(cfg.depth, f"in{p}_vc{vc}")
                rd = Signal(bits + 1, name=f"in{p}_vc{vc}_rd")
                wr = Signal(bits + 1, name=f"in{p}_vc{vc}_wr")
                vc_fifos.append((store, rd, wr, bits))
                heads.append(store[rd[:bits]] if bits else store[0])
                nonempty.append(rd != wr)

        # ---- per-requester and per-output state ----------------------------------------------
        port_bits = (P - 1).bit_length()
        vc_bits = max(1, (V - 1).bit_length())
        held = Signal(R)  # a packet in progress holds (alloc_port, alloc_vc)
        alloc_port = [Signal(port_bits, name=f"alloc_port{r}") for r in range(R)]
        alloc_vc = [Signal(vc_bits, name=f"alloc_vc{r}") for r in range(R)]
        busy = Signal(P * V)  # output VCs held by a packet; the ejection port uses bit 0
        credit_bits = cfg.depth.bit_length()
        credits = [
            [Signal(credit_bits, init=cfg.depth, name=f"credit{o}_vc{vc}") for vc in range(V)]
            for o in range(P)
        ]
        has_credit = Signal(P * V)
        for o in range(1, P):
            for vc in range(V):
                m.d.comb += has_credit[o * V + vc].eq(credits[o][vc] != 0)
        ej_free = Signal()
        m.d.comb += ej_free.eq(~self.eject.valid | self.eject.ready)
        rr = [Signal(range(R), name=f"rr{o}") for o in range(P)]

        # ---- requests ------------------------------------------------------------------------
        want = Signal(R)
        drop_orphan = Signal(R)
        drop_dest = Signal(R)
        req_port = [Signal(port_bits, name=f"req_port{r}") for r in range(R)]
        req_vc = [Signal(vc_bits, name=f"req_vc{r}") for r in range(R)]
        for r in range(R):
            flit = data.View(layout, heads[r])
            head = flit.payload.head
            is_head = (flit.kind == FlitKind.HEAD) | (flit.kind == FlitKind.SINGLE)
            bad_dest = _outside(head.dst, cfg)
            r_port = Signal(port_bits, name=f"route_port{r}")
            r_cls = Signal(name=f"route_cls{r}")
            for d in reversed(range(fmt.dims)):  # dimension 0 last: it wins
                k = cfg.shape[d]
                c, t, s = here[d], head.dst[d], head.src[d]
                dist = Mux(t >= c, t - c, k - (c - t))  # operands of one width
                plus = dist <= k // 2
                cls = Mux(plus, (c == k - 1) | (c < s), (c == 0) | (c > s))
                with m.If(t != c):
                    m.d.comb += [r_port.eq(Mux(plus, 1 + 2 * d, 2 + 2 * d)), r_cls.eq(cls)]
            lane = flit.vc[:lane_bits] if lane_bits else Const(0, 1)
            new_vc = Mux(r_port == 0, lane, Cat(lane, r_cls) if lane_bits else r_cls)
            port = Mux(held[r], alloc_port[r], r_port)
            ovc = Mux(held[r], alloc_vc[r], new_vc)
            m.d.comb += [req_port[r].eq(port), req_vc[r].eq(ovc)]
            index = port * V + ovc
            ok_link = has_credit.bit_select(index, 1) & (held[r] | ~busy.bit_select(index, 1))
            ok_eject = ej_free & (held[r] | ~busy[0])
            ok = Mux(port == 0, ok_eject, ok_link)
            start = nonempty[r] & ~held[r]
            if r == 0:  # the injection buffer holds only checked packets
                m.d.comb += want[r].eq(nonempty[r] & ok)
            else:
                m.d.comb += [
                    drop_orphan[r].eq(start & ~is_head),
                    drop_dest[r].eq(start & is_head & bad_dest),
                    want[r].eq(nonempty[r] & ok & (held[r] | (is_head & ~bad_dest))),
                ]

        # ---- switch: one round-robin arbiter per output ---------------------------------------
        granted = Signal(R)
        grant_any = []
        out_flits = []
        grants = []
        for o in range(P):
            req = Cat(*[want[r] & (req_port[r] == o) for r in range(R)])
            grant = _rr_pick(m, req, rr[o], R)
            grants.append(grant)

            def select(values, width, grant=grant):
                return _or_reduce([Mux(grant[r], v, 0) for r, v in enumerate(values)], width)

            # the granted flit's kind and payload; its VC is replaced by the output VC
            views = [data.View(layout, h) for h in heads]
            sel_kind = Signal(FlitKind, name=f"sel_kind{o}")
            sel_payload = Signal(len(views[0].payload.as_value()), name=f"sel_payload{o}")
            sel_vc = Signal(vc_bits, name=f"sel_vc{o}")
            m.d.comb += [
                sel_kind.eq(select([f.kind for f in views], 2)),
                sel_payload.eq(select([f.payload.as_value() for f in views], len(sel_payload))),
                sel_vc.eq(select(req_vc, vc_bits)),
            ]
            out = data.View(layout, Signal(W, name=f"out_flit{o}"))
            m.d.comb += [
                out.kind.eq(sel_kind),
                out.vc.eq(sel_vc),  # the ejection port's "VC" is the lane
                out.payload.eq(sel_payload),
            ]
            out_flits.append((out, sel_vc))
            grant_any.append(grant.any())
            with m.If(grant.any()):
                m.d.sync += rr[o].eq(Mux(_encode(grant, R) == R - 1, 0, _encode(grant, R) + 1))
                # a head takes its output VC, a tail frees it (the ejection port has one)
                holds = [(o * V + vc, sel_vc == vc) for vc in range(V)] if o else [(0, 1)]
                for bit, hit in holds:
                    with m.If(hit & (sel_kind == FlitKind.HEAD)):
                        m.d.sync += busy[bit].eq(1)
                    with m.If(hit & (sel_kind == FlitKind.TAIL)):
                        m.d.sync += busy[bit].eq(0)
        m.d.comb += granted.eq(_or_reduce(grants, R))

        for r in range(R):
            flit = data.View(layout, heads[r])
            with m.If(granted[r]):
                with m.If(flit.kind == FlitKind.HEAD):
                    m.d.sync += [
                        held[r].eq(1),
                        alloc_port[r].eq(req_port[r]),
                        alloc_vc[r].eq(req_vc[r]),
                    ]
                with m.If(flit.kind == FlitKind.TAIL):
                    m.d.sync += held[r].eq(0)

        # ---- outputs: link registers, ejection register, credits --------------------------
        credit_over = []  # a credit returned to a VC that holds every credit: ignored
        for o in range(1, P):
            link = self.o_links[o - 1]
            out, sel_vc = out_flits[o]
            m.d.sync += [link.valid.eq(grant_any[o]), link.flit.eq(out.as_value())]
            for vc in range(V):
                spent = grant_any[o] & (sel_vc == vc)
                over = Signal(name=f"credit_over{o}_vc{vc}")
                m.d.comb += over.eq(link.credit[vc] & ~spent & (credits[o][vc] == cfg.depth))
                credit_over.append(over)
                with m.If(~over):
                    m.d.sync += credits[o][vc].eq(credits[o][vc] + link.credit[vc] - spent)
        with m.If(grant_any[0]):
            m.d.sync += [self.eject.valid.eq(1), self.eject.payload.eq(out_flits[0][0].as_value())]
        with m.Elif(self.eject.ready):
            m.d.sync += self.eject.valid.eq(0)
        pops = Signal(R)
        m.d.comb += pops.eq(granted | drop_orphan | drop_dest)
        no_credit = []  # a flit on a link input that finds its VC's FIFO full: dropped
        for p in range(1, P):
            link = self.i_links[p - 1]
            m.d.sync += link.credit.eq(pops[1 + (p - 1) * V : 1 + p * V])
            incoming = data.View(layout, link.flit)
            for vc in range(V):
                store, rd, wr, bits = vc_fifos[(p - 1) * V + vc]
                r = 1 + (p - 1) * V + vc
                m.d.sync += rd.eq(rd + pops[r])
                # full after this cycle's read: the neighbour sent without a credit
                full = ((wr - rd)[: bits + 1] == cfg.depth) & ~pops[r]
                arrive = Signal(name=f"in{p}_vc{vc}_arrive")
                m.d.comb += arrive.eq(link.valid & (incoming.vc == vc))
                with m.If(arrive & ~full):
                    slot = store[wr[:bits]] if bits else store[0]
                    m.d.sync += [slot.eq(link.flit), wr.eq(wr + 1)]
                lost = Signal(name=f"in{p}_vc{vc}_no_credit")
                m.d.comb += lost.eq(arrive & full)
                no_credit.append(lost)
                # the last flit written, if a head or body, becomes its packet's end
                last = store[(wr - 1)[:bits]] if bits else store[0]
                with m.If(lost & ~last[1]):
                    m.d.sync += last[:2].eq(~last[:2])

        # ---- injection: check, write, commit or roll back -------------------------------------
        inj = data.View(layout, self.inject.payload)
        inj_head = inj.payload.head
        occupancy = (inj_wr - inj_rd)[: inj_bits + 1]
        m.d.comb += self.inject.ready.eq(occupancy != cfg.inject_depth)
        accept = self.inject.valid & self.inject.ready
        m.d.sync += inj_rd.eq(inj_rd + pops[0])
        is_open = Signal()
        count_bits = (fmt.max_length + 1).bit_length()  # up to one flit past the longest
        count = Signal(count_bits)  # flits of the open packet so far
        length = Signal(count_bits)
        seen = (count + 1)[:count_bits]  # ... with this one: at most max_length + 1, it fits
        pkt_bad_dest = Signal()
        over = Signal()
        inj_bad_dest = _outside(inj_head.dst, cfg)
        inj_length = inj_head.length + 1
        inc = {kind: Signal(name=f"inj_{kind.name.lower()}") for kind in MALFORMED}
        rollback = Signal()  # a head came before the open packet's tail: that one is dropped

        def write(at):
            slot = at[:inj_bits] if inj_bits else 0
            return [inj_store[slot].eq(self.inject.payload)]

        with m.If(accept):
            with m.Switch(inj.kind):
                with m.Case(FlitKind.HEAD, FlitKind.SINGLE):
                    m.d.comb += rollback.eq(is_open)
                    m.d.sync += inj_wr.eq(inj_commit)  # rolls back an unfinished packet
                    with m.If(inj.kind == FlitKind.SINGLE):
                        m.d.sync += is_open.eq(0)
                        with m.If(inj_bad_dest):
                            m.d.comb += inc[DropKind.BAD_DEST].eq(1)
                        with m.Elif(inj_length != 1):
                            m.d.comb += inc[DropKind.BAD_LENGTH].eq(1)
                        with m.Else():
                            m.d.sync += write(inj_commit)
                            m.d.sync += [inj_wr.eq(inj_commit + 1), inj_commit.eq(inj_commit + 1)]
                    with m.Else():
                        m.d.sync += [
                            is_open.eq(1),
                            count.eq(1),
                            length.eq(inj_length),
                            pkt_bad_dest.eq(inj_bad_dest),
                            over.eq(0),
                        ]
                        with m.If(~inj_bad_dest):
                            m.d.sync += write(inj_commit)
                            m.d.sync += inj_wr.eq(inj_commit + 1)
                with m.Case(FlitKind.BODY):
                    with m.If(~is_open):
                        m.d.comb += inc[DropKind.ORPHAN].eq(1)
                    with m.Elif(~over):
                        m.d.sync += count.eq(seen)
                        with m.If(seen >= length):
                            m.d.sync += over.eq(1)
                        with m.Elif(~pkt_bad_dest):
                            m.d.sync += write(inj_wr)
                            m.d.sync += inj_wr.eq(inj_wr + 1)
                with m.Case(FlitKind.TAIL):
                    with m.If(~is_open):
                        m.d.comb += inc[DropKind.ORPHAN].eq(1)
                    with m.Else():
                        m.d.sync += is_open.eq(0)
                        with m.If(pkt_bad_dest):
                            m.d.comb += inc[DropKind.BAD_DEST].eq(1)
                        with m.Elif(over | (seen != length)):
                            m.d.comb += inc[DropKind.BAD_LENGTH].eq(1)
                            m.d.sync += inj_wr.eq(inj_commit)
                        with m.Else():
                            m.d.sync += write(inj_wr)
                            m.d.sync += [inj_wr.eq(inj_wr + 1), inj_commit.eq(inj_wr + 1)]

        # ---- drop counters ---------------------------------------------------------------------
        top = (1 << cfg.counter_bits) - 1
        links = range(1, R)
        terms = {
            DropKind.BAD_DEST: [inc[DropKind.BAD_DEST]] + [drop_dest[r] for r in links],
            DropKind.BAD_LENGTH: [inc[DropKind.BAD_LENGTH], rollback],
            DropKind.ORPHAN: [inc[DropKind.ORPHAN]] + [drop_orphan[r] for r in links],
            DropKind.NO_CREDIT: no_credit,
            DropKind.CREDIT_OVERFLOW: credit_over,
        }
        for kind in DropKind:
            add = self.drops[kind] + _add_tree(terms[kind])
            total = Signal(len(add), name=f"drops_next_{kind.name.lower()}")  # the adder's width
            m.d.comb += total.eq(add)
            m.d.sync += self.drops[kind].eq(Mux(total > top, top, total))
        return m


def _outside(dst, cfg):
    """Whether coordinates ``dst`` lie outside the torus (a ring of ``2**coord_bits`` holds
    every value its field can take: no comparison for it)."""
    full = 1 << cfg.coord_bits
    return Cat(*[dst[d] >= k for d, k in enumerate(cfg.shape) if k < full], Const(0, 1)).any()


def _add_tree(values):
    """Sum of ``values`` added in pairs, so the width grows with the log of their count (a
    running sum would grow a bit per term)."""
    values = list(values)
    while len(values) > 1:
        odd = values[-1:] if len(values) % 2 else []
        values = [a + b for a, b in zip(values[0::2], values[1::2], strict=False)] + odd
    return values[0]


def _or_reduce(values, width):
    out = Const(0, width)
    for v in values:
        out = out | v
    return out[:width]
