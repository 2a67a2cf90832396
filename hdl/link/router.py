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
* output registers for every link and the ejection stream, credit registers for every link
  input, saturating drop counters (:class:`tlm.link.config.DropKind`), also for the link
  protocol's misuse: a flit that finds its VC's FIFO full, a credit not owed.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from tlm.link.config import DropKind, LinkConfig
from tlm.link.routing import lane
from tlm.link.topology import LOCAL

from .arbiter import RoundRobinArbiter
from .drops import count_drops
from .flit import FlitKind, flit_layout, starts_packet
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
        heads = [data.View(layout, b.head) for b in buffers]
        head_routes = [data.View(route_layout, b.head_aux) for b in buffers]

        # ---- state per requester and per output VC -------------------------------------------
        held = Signal(R)  # a packet in progress holds (alloc_port, alloc_vc)
        alloc_port = [Signal(P, name=f"alloc_port{r}") for r in range(R)]  # one-hot
        alloc_vc = [Signal(vc_bits, name=f"alloc_vc{r}") for r in range(R)]
        busy = Signal(P * V)  # output VCs held by a packet; the ejection port uses bit 0
        credit_bits = cfg.depth.bit_length()
        credits = [
            [Signal(credit_bits, init=cfg.depth, name=f"credit{o}_vc{vc}") for vc in range(V)]
            for o in range(P)
        ]
        eject_free = Signal()
        m.d.comb += eject_free.eq(~self.eject.valid | self.eject.ready)
        # what a flit needs from each output VC, from registers alone: a credit (the ejection
        # port: a free register), and, for a head, the VC not held by another packet
        # credits != 0, kept as a register of its own: the request reads no comparator
        has_credit = {
            (o, vc): Signal(init=1, name=f"has_credit{o}_vc{vc}")
            for o in range(1, P)
            for vc in range(V)
        }
        may_go = [[eject_free] * V] + [[has_credit[o, vc] for vc in range(V)] for o in range(1, P)]
        may_start = [[eject_free & ~busy[0]] * V] + [
            [may_go[o][vc] & ~busy[o * V + vc] for vc in range(V)] for o in range(1, P)
        ]

        # ---- requests: what each front flit asks for, from the route kept beside it ------------
        # asks[o][r]: requester r asks output o - its port, and that output's VC can take it
        asks = [Signal(R, name=f"asks{o}") for o in range(P)]
        drop_orphan = Signal(R)
        drop_dest = Signal(R)
        req_port = [Signal(P, name=f"req_port{r}") for r in range(R)]  # one-hot
        req_vc = [Signal(vc_bits, name=f"req_vc{r}") for r in range(R)]
        for r, flit in enumerate(heads):
            route = head_routes[r]
            port = Mux(held[r], alloc_port[r], route.port)
            ovc = Mux(held[r], alloc_vc[r], route.out_vc)
            m.d.comb += [req_port[r].eq(port), req_vc[r].eq(ovc)]
            # each output's answer for the VC asked (the ejection port has one)
            may = [
                Cat(*[Mux(held[r], go, start) for go, start in zip(g, s, strict=True)])
                for g, s in zip(may_go, may_start, strict=True)
            ]
            # (per output: no OR over the ports before the arbiters, and a port field that is
            # not one-hot could never spend a credit its output does not have)
            nonempty = buffers[r].nonempty
            if r == 0:  # the injection buffer holds only checked packets
                ready = nonempty
            else:
                starts = starts_packet(flit.kind)
                start = nonempty & ~held[r]  # no packet in progress: the flit must start one
                m.d.comb += [
                    drop_orphan[r].eq(start & ~starts),
                    drop_dest[r].eq(start & starts & route.bad_dest),
                ]
                ready = nonempty & (held[r] | (starts & ~route.bad_dest))
            for o in range(P):
                m.d.comb += asks[o][r].eq(ready & port[o] & may[o].bit_select(ovc, 1))

        # ---- switch: one round-robin arbiter per output ---------------------------------------
        granted = Signal(R)
        grants = []
        out_flits = []
        for o in range(P):
            arbiter = m.submodules[f"arbiter{o}"] = RoundRobinArbiter(R)
            m.d.comb += arbiter.requests.eq(asks[o])
            grant = arbiter.grant
            grants.append(grant)

            def select(values, width, grant=grant):
                return _or_reduce([Mux(grant[r], v, 0) for r, v in enumerate(values)], width)

            # the granted flit's kind and payload; its VC is replaced by the output VC
            sel_kind = Signal(FlitKind, name=f"sel_kind{o}")
            sel_payload = Signal(len(heads[0].payload.as_value()), name=f"sel_payload{o}")
            sel_vc = Signal(vc_bits, name=f"sel_vc{o}")
            m.d.comb += [
                sel_kind.eq(select([f.kind for f in heads], 2)),
                sel_payload.eq(select([f.payload.as_value() for f in heads], len(sel_payload))),
                sel_vc.eq(select(req_vc, vc_bits)),
            ]
            out = data.View(layout, Signal(cfg.width, name=f"out_flit{o}"))
            m.d.comb += [
                out.kind.eq(sel_kind),
                out.vc.eq(sel_vc),  # the ejection port's "VC" is the lane
                out.payload.eq(sel_payload),
            ]
            out_flits.append((out, sel_vc, arbiter.granted))
            with m.If(arbiter.granted):
                # a head takes its output VC, a tail frees it (the ejection port has one)
                holds = [(o * V + vc, sel_vc == vc) for vc in range(V)] if o else [(0, 1)]
                for bit, hit in holds:
                    with m.If(hit & (sel_kind == FlitKind.HEAD)):
                        m.d.sync += busy[bit].eq(1)
                    with m.If(hit & (sel_kind == FlitKind.TAIL)):
                        m.d.sync += busy[bit].eq(0)
        m.d.comb += granted.eq(_or_reduce(grants, R))

        for r, flit in enumerate(heads):
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
            out, _, sent = out_flits[o]
            m.d.sync += [link.valid.eq(sent), link.flit.eq(out.as_value())]
            for vc in range(V):
                # spent comes last (after the grant): it picks between values of registers
                spent = _or_reduce([grants[o][r] & (req_vc[r] == vc) for r in range(R)], 1)
                count, back = credits[o][vc], link.credit[vc]
                full = count == cfg.depth
                over = Signal(name=f"credit_over{o}_vc{vc}")
                m.d.comb += over.eq(back & ~spent & full)
                credit_over.append(over)
                up = Mux(back & ~full, count + 1, count)  # a credit not owed is ignored
                m.d.sync += count.eq(Mux(spent, Mux(back, count, count - 1), up))
                nonzero = has_credit[o, vc]  # the same rule for count != 0
                rises = nonzero | (back & ~full)
                m.d.sync += nonzero.eq(Mux(spent, Mux(back, nonzero, count != 1), rises))
        eject_out, _, eject_sent = out_flits[LOCAL]
        with m.If(eject_sent):
            m.d.sync += [self.eject.valid.eq(1), self.eject.payload.eq(eject_out.as_value())]
        with m.Elif(self.eject.ready):
            m.d.sync += self.eject.valid.eq(0)

        # ---- buffer writes: pops, link inputs (with misuse), injection ------------------------
        pops = Signal(R)
        m.d.comb += pops.eq(granted | drop_orphan | drop_dest)
        no_credit = []  # a flit on a link input that finds its VC's FIFO full: dropped
        for p in range(1, P):
            link = self.i_links[p - 1]
            m.d.sync += link.credit.eq(Cat(*[pops[requester(p, vc)] for vc in range(V)]))
            incoming = data.View(layout, link.flit)
            for vc in range(V):
                arrive = Signal(name=f"in{p}_vc{vc}_arrive")
                m.d.comb += arrive.eq(link.valid & (incoming.vc == vc))
                pop = pops[requester(p, vc)]
                no_credit.append(fifos[p, vc].connect(pop, arrive, link.flit, routes[p]))
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
