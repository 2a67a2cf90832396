"""Torus router: wormhole, credit flow control, dimension-order routing with dateline VCs.

The cycle-exact reference is :class:`tlm.link.router.Router`; its docstring and ``docs/noc.md``
give the pipeline, which this module implements register for register, wiring one part per
concept (``docs/noc.md``, "RTL structure"): :class:`~hdl.link.route.RouteCompute` per input
port, :class:`~hdl.link.arbiter.RoundRobinArbiter` per output,
:class:`~hdl.link.vc_fifo.VcFifo` per link input VC, the
:class:`~hdl.link.injection.InjectionChecker` and the drop counters
(:func:`~hdl.link.drops.count_drops`):

* link input FIFOs, one per VC (``depth`` flits, no reset on the storage);
* an injection buffer that commits a packet only once its tail has been checked
  (read, commit and write pointers; a malformed packet rolls the write pointer back);
* lookahead routing: each flit's route (output port, output VC, destination outside the
  torus) computed as it is written and kept beside it, so that the front flit's request
  needs no route compute (only a head's is used);
* per output port one round-robin arbiter over every requester (the injection buffer and
  each link VC), the switch and VC allocation in one step since each packet's output VC is
  fixed by its lane and dateline class (:mod:`tlm.link.routing`);
* a registered grant: a cycle allocates into the arbiters' grant registers, the next
  traverses from them (the granted flit leaves its buffer into its output register). The
  state the requests read (packets in progress, busy output VCs, credits) is kept in
  registers a cycle behind the grants and brought up to date at the start of the cycle from
  the grant registers; a buffer whose front leaves asks with the flit behind it (a second
  read port), so a stream still asks every cycle;
* output registers for every link, the ejection queue (its front the ejection register, a
  second slot behind it), the credits back to every link input (an OR of the grant
  registers), saturating drop counters (:class:`tlm.link.config.DropKind`), also for the
  link protocol's misuse: a flit that finds its VC's FIFO full, a credit not owed.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from tlm.link.config import DropKind, LinkConfig
from tlm.link.router import EJECT_SLOTS
from tlm.link.routing import lane
from tlm.link.topology import LOCAL

from .arbiter import RoundRobinArbiter
from .drops import count_drops
from .flit import FlitKind, closed_kind, flit_layout, starts_packet
from .injection import InjectionChecker
from .route import RouteCompute
from .vc_fifo import VcFifo

__all__ = ["Router", "LinkSignature", "watched_flits", "drop_name"]


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
        m = Module()
        P, V, R = cfg.ports, cfg.vcs, cfg.requesters
        layout = flit_layout(cfg.fmt)
        requester = cfg.requester  # the one index rule: (link port, VC) -> requester

        # ---- lookahead routes: one route compute per input, on the flit being written -------
        vc_bits = cfg.fmt.bits("vc")
        # the output port one-hot: a request is then an AND-OR, not a decode of an index
        route_layout = data.StructLayout({"port": P, "out_vc": vc_bits, "bad_dest": 1})
        arriving = [self.inject.payload] + [link.flit for link in self.i_links]
        routes = []
        for p, word in enumerate(arriving):
            flit = data.View(layout, word)
            route = m.submodules[f"route{p}"] = RouteCompute(cfg)
            m.d.comb += [
                route.here.eq(self.coord),
                route.dst.eq(flit.payload.head.dst),
                route.src.eq(flit.payload.head.src),
            ]
            if cfg.lanes > 1:  # the lane rule of tlm.link.routing, on the flit's VC field
                m.d.comb += route.lane.eq(lane(flit.vc, V))
            port = Cat(*[route.port == o for o in range(P)])
            # a view of the route's outputs (no named wire: nothing would read it)
            routes.append(data.View(route_layout, Cat(port, route.out_vc, route.bad_dest)))

        # ---- buffers: requester 0 = the injection buffer, then each VC of each link port ----
        inj = InjectionChecker(
            m,
            cfg,
            layout,
            self.inject,
            routes[0].bad_dest,
            aux=routes[0].as_value(),
        )
        fifos = {
            (p, vc): VcFifo(m, layout, cfg.depth, f"in{p}_vc{vc}", route_layout.size)
            for p in range(1, P)
            for vc in range(V)
        }
        buffers = [inj] + [fifos[cfg.requester_link(r)] for r in range(1, R)]
        fronts = [data.View(layout, b.head) for b in buffers]

        # ---- the grant registers: what was granted (or dropped) last cycle traverses now ------
        arbiters = [RoundRobinArbiter(R) for _ in range(P)]
        for o, arbiter in enumerate(arbiters):
            m.submodules[f"arbiter{o}"] = arbiter
        last = [arbiter.last for arbiter in arbiters]  # per output, one-hot over requesters
        was_granted = Signal(R)  # requester r's front flit was granted last cycle
        m.d.comb += was_granted.eq(_or_reduce(last, R))
        dropped = Signal(R)  # ... or dropped (an orphan, a bad destination)
        pops = Signal(R)  # the front flits that leave their buffers this cycle
        m.d.comb += pops.eq(was_granted | dropped)
        # per requester, registered every cycle: what its request flit was (its kind, one-hot
        # output port and output VC); it describes the granted flit when was_granted
        last_kind = [Signal(FlitKind, name=f"last_kind{r}") for r in range(R)]
        last_port = [Signal(P, name=f"last_port{r}") for r in range(R)]
        last_vc = [Signal(vc_bits, name=f"last_vc{r}") for r in range(R)]

        # ---- state per requester and per output VC, as last cycle's grants leave it ----------
        # (the registers are a cycle behind the grants: each is written with its value here)
        held = Signal(R)  # a packet in progress holds (alloc_port, alloc_vc)
        alloc_port = [Signal(P, name=f"alloc_port{r}") for r in range(R)]  # one-hot
        alloc_vc = [Signal(vc_bits, name=f"alloc_vc{r}") for r in range(R)]
        now_held = Signal(R)
        now_port = [Signal(P, name=f"now_port{r}") for r in range(R)]
        now_vc = [Signal(vc_bits, name=f"now_vc{r}") for r in range(R)]
        for r in range(R):
            kind = last_kind[r]
            took = was_granted[r] & (kind == FlitKind.HEAD)
            goes_on = (kind == FlitKind.HEAD) | (kind == FlitKind.BODY)
            m.d.comb += [
                now_held[r].eq(Mux(was_granted[r], goes_on, held[r])),
                now_port[r].eq(Mux(took, last_port[r], alloc_port[r])),
                now_vc[r].eq(Mux(took, last_vc[r], alloc_vc[r])),
            ]
            m.d.sync += [held[r].eq(now_held[r]), alloc_port[r].eq(now_port[r])]
            m.d.sync += alloc_vc[r].eq(now_vc[r])

        # output VCs held by a packet (the ejection port uses bit 0), and the credits last
        # cycle's grants spent: from the grant registers and what was granted
        busy = Signal(P * V)
        now_busy = {}  # by bit: the ejection port has one
        spent = {}
        for o in range(P):
            for vc in range(V if o else 1):
                hit = [last[o][r] & ((last_vc[r] == vc) if o else 1) for r in range(R)]
                pairs = list(zip(hit, last_kind, strict=True))
                takes = _or_reduce([h & (k == FlitKind.HEAD) for h, k in pairs], 1)
                frees = _or_reduce([h & (k == FlitKind.TAIL) for h, k in pairs], 1)
                bit = o * V + vc
                now_busy[bit] = (busy[bit] | takes) & ~frees
                m.d.sync += busy[bit].eq(now_busy[bit])
                if o:
                    spent[o, vc] = Signal(name=f"spent{o}_vc{vc}")
                    m.d.comb += spent[o, vc].eq(_or_reduce(hit, 1))

        # credits: the counter holds what is left before last cycle's grant spent one; a
        # credit returned this cycle may be spent this cycle
        credit_bits = cfg.depth.bit_length()
        credits = [
            [Signal(credit_bits, init=cfg.depth, name=f"credit{o}_vc{vc}") for vc in range(V)]
            for o in range(P)
        ]
        # credits != 0, kept as a register of its own: the request reads no comparator
        has_credit = {
            (o, vc): Signal(init=1, name=f"has_credit{o}_vc{vc}")
            for o in range(1, P)
            for vc in range(V)
        }
        credit_over = []  # a credit returned to a VC that holds every credit: ignored
        may_go = [None] * P
        for o in range(1, P):
            link = self.o_links[o - 1]
            go = []
            for vc in range(V):
                count, back, gone = credits[o][vc], link.credit[vc], spent[o, vc]
                nonzero = has_credit[o, vc]
                over = Signal(name=f"credit_over{o}_vc{vc}")
                m.d.comb += over.eq(back & ~gone & (count == cfg.depth))
                credit_over.append(over)
                left = Signal(name=f"credit_left{o}_vc{vc}")  # one left after last spent
                m.d.comb += left.eq(Mux(gone, count[1:].any(), nonzero) | back)
                go.append(left)
                new = (count - gone + (back & ~over))[:credit_bits]
                m.d.sync += [count.eq(new), nonzero.eq(new != 0)]
            may_go[o] = go

        # the ejection queue: its front is the ejection register, a second slot takes a flit
        # granted while the front waits; its credits are its slots not yet granted
        eject_bits = EJECT_SLOTS.bit_length()
        eject_credits = Signal(eject_bits, init=EJECT_SLOTS)
        eject_taken = Signal()
        m.d.comb += eject_taken.eq(self.eject.valid & self.eject.ready)
        eject_spent = Signal()  # last cycle's grant took a slot
        m.d.comb += eject_spent.eq(last[LOCAL].any())
        eject_left = Signal()
        m.d.comb += eject_left.eq(
            Mux(eject_spent, eject_credits[1:].any(), eject_credits.any()) | eject_taken
        )
        m.d.sync += eject_credits.eq(eject_credits - eject_spent + eject_taken)
        may_go[LOCAL] = [eject_left] * V
        may_start = [[eject_left & ~now_busy[0]] * V] + [
            [may_go[o][vc] & ~now_busy[o * V + vc] for vc in range(V)] for o in range(1, P)
        ]

        # ---- requests: what each buffer's next flit asks for, from the route kept beside it ---
        # the next flit is the front, or the flit behind it when the front leaves this cycle
        # (a second read port: a stream asks every cycle)
        asks = [Signal(R, name=f"asks{o}") for o in range(P)]
        drop_orphan = Signal(R)
        drop_dest = Signal(R)
        for r, b in enumerate(buffers):
            flit = data.View(layout, Mux(pops[r], b.behind, b.head))
            route = data.View(route_layout, Mux(pops[r], b.behind_aux, b.head_aux))
            nonempty = Mux(pops[r], b.two, b.nonempty)
            port = Mux(now_held[r], now_port[r], route.port)
            ovc = Mux(now_held[r], now_vc[r], route.out_vc)
            kind = flit.kind
            if r and cfg.depth == 1:
                # with one slot, the flit a no-credit drop closes may be the one asking now:
                # if it is granted, its grant is recorded as for the closed kind (its packet
                # ends there, as the reference's Router._close_granted)
                kind = Mux(b.no_credit, closed_kind(flit.kind), flit.kind)
            m.d.sync += [last_kind[r].eq(kind), last_port[r].eq(port), last_vc[r].eq(ovc)]
            # each output's answer for the VC asked (the ejection port has one)
            may = [
                Cat(*[Mux(now_held[r], go, start) for go, start in zip(g, s, strict=True)])
                for g, s in zip(may_go, may_start, strict=True)
            ]
            # (per output: no OR over the ports before the arbiters, and a port field that is
            # not one-hot could never spend a credit its output does not have)
            if r == 0:  # the injection buffer holds only checked packets
                ready = nonempty
            else:
                starts = starts_packet(flit.kind)
                start = nonempty & ~now_held[r]  # no packet in progress: it must start one
                m.d.comb += [
                    drop_orphan[r].eq(start & ~starts),
                    drop_dest[r].eq(start & starts & route.bad_dest),
                ]
                ready = nonempty & (now_held[r] | (starts & ~route.bad_dest))
            for o in range(P):
                m.d.comb += asks[o][r].eq(ready & port[o] & may[o].bit_select(ovc, 1))
        m.d.sync += dropped.eq(drop_orphan | drop_dest)

        # ---- switch: one round-robin arbiter per output, its grant registered --------------
        for o, arbiter in enumerate(arbiters):
            m.d.comb += arbiter.requests.eq(asks[o])

        # ---- traverse: last cycle's grants, from the grant registers -------------------------
        out_flits = []
        for o in range(P):
            grant = last[o]

            def select(values, width, grant=grant):
                return _or_reduce([Mux(grant[r], v, 0) for r, v in enumerate(values)], width)

            # the granted flit's kind and payload; its VC is replaced by the output VC
            out = data.View(layout, Signal(cfg.width, name=f"out_flit{o}"))
            payload = len(fronts[0].payload.as_value())
            m.d.comb += [
                out.kind.eq(select([f.kind for f in fronts], 2)),
                out.vc.eq(select(last_vc, vc_bits)),  # the ejection port's "VC" is the lane
                out.payload.eq(select([f.payload.as_value() for f in fronts], payload)),
            ]
            out_flits.append((out, grant.any()))

        # ---- outputs: link registers, ejection queue, credits -------------------------------
        for o in range(1, P):
            link = self.o_links[o - 1]
            out, sent = out_flits[o]
            m.d.sync += [link.valid.eq(sent), link.flit.eq(out.as_value())]
        eject_out, eject_push = out_flits[LOCAL]
        second = Signal(cfg.width, name="eject_second")
        second_valid = Signal(name="eject_second_valid")
        with m.If(~self.eject.valid | self.eject.ready):  # the front leaves, or is empty
            with m.If(second_valid):
                m.d.sync += [self.eject.valid.eq(1), self.eject.payload.eq(second)]
                m.d.sync += [second_valid.eq(eject_push), second.eq(eject_out.as_value())]
            with m.Else():
                m.d.sync += self.eject.valid.eq(eject_push)
                m.d.sync += self.eject.payload.eq(eject_out.as_value())
        with m.Elif(eject_push):
            m.d.sync += [second_valid.eq(1), second.eq(eject_out.as_value())]

        # ---- buffer writes: pops, link inputs (with misuse), injection ------------------------
        no_credit = []  # a flit on a link input that finds its VC's FIFO full: dropped
        for p in range(1, P):
            link = self.i_links[p - 1]
            # a slot is credited back upstream in the cycle after its flit was granted or
            # dropped: an OR of the grant registers, not a register of its own (a register
            # would add a cycle to the credit loop; "Synthesis figures" in docs/noc.md)
            m.d.comb += link.credit.eq(Cat(*[pops[requester(p, vc)] for vc in range(V)]))
            incoming = data.View(layout, link.flit)
            for vc in range(V):
                arrive = Signal(name=f"in{p}_vc{vc}_arrive")
                m.d.comb += arrive.eq(link.valid & (incoming.vc == vc))
                r = requester(p, vc)
                no_credit.append(fifos[p, vc].connect(pops[r], arrive, link.flit, routes[p]))
        inj.connect(pops[0])

        # ---- drop counters ---------------------------------------------------------------------
        links = range(1, R)
        events = {
            DropKind.BAD_DEST: [inj.drops[DropKind.BAD_DEST]] + [drop_dest[r] for r in links],
            DropKind.BAD_LENGTH: [inj.drops[DropKind.BAD_LENGTH], inj.rollback],
            DropKind.ORPHAN: [inj.drops[DropKind.ORPHAN]] + [drop_orphan[r] for r in links],
            DropKind.NO_CREDIT: no_credit,
            DropKind.CREDIT_OVERFLOW: credit_over,
        }
        count_drops(m, self.drops, events, cfg.counter_bits)

        # ---- names for the waveform: each flit port decoded into its fields, each drop counter
        # by its kind (wires alone: no logic, nothing for synthesis to keep) --------------------
        for name, flit in watched_flits(self, P):
            m.d.comb += Signal(layout, name=name).eq(flit)
        for kind in DropKind:
            m.d.comb += Signal(cfg.counter_bits, name=drop_name(kind)).eq(self.drops[kind])
        return m


def watched_flits(router, ports: int) -> list[tuple[str, Value]]:
    """``(name, flit)`` of each flit port a waveform shows decoded
    (:func:`~hdl.link.flit.flit_fields`):
    ``inject_flit``, ``eject_flit``, ``in{p}_flit`` and ``out{p}_flit`` for link port ``p``."""
    out = [("inject_flit", router.inject.payload), ("eject_flit", router.eject.payload)]
    out += [(f"in{p}_flit", router.i_links[p - 1].flit) for p in range(1, ports)]
    out += [(f"out{p}_flit", router.o_links[p - 1].flit) for p in range(1, ports)]
    return out


def drop_name(kind: DropKind) -> str:
    """The waveform's name of the ``kind`` drop counter: ``drops_bad_dest``, ..."""
    return f"drops_{kind.name.lower()}"


def _or_reduce(values, width):
    out = Const(0, width)
    for v in values:
        out = out | v
    return out[:width]
