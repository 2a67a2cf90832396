"""Cycle-exact model of one router (:class:`hdl.link.router.Router`).

Each :meth:`Router.step` takes what is on the router's input wires during one clock cycle and
advances one clock; :meth:`Router.outputs` is what the router shows during a cycle. Every output
is a register (or, for ``inject_ready``, a function of registers only), so a bench compares
``outputs()`` with the RTL every cycle and then steps both with the same inputs.

The rules are those of docs/noc.md, "Router": a flit is buffered per VC (link inputs) or
through the checker (injection, store-and-forward, malformed packets rolled back and counted),
asks for its output port and VC with a credit, is granted round robin over all requesters, and
is written into the output register in the cycle after its grant (a registered grant: the
grant spends the credit and sends the slot's credit back; the flit leaves its buffer a cycle
later, and the next request reads the flit behind it) - three cycles per router, so one flit
alone leaves the ejection register ``3 H + 3`` cycles after it was accepted over ``H`` hops.
An ejection port is a queue of two flits whose front is the register. Bad input and link
misuse are dropped and counted by :class:`~tlm.link.config.DropKind` ("Bad input"), never
raised; a drop is registered first and reaches its counter a cycle later
(docs/noc.md, "Synthesis figures"), so ``outputs().counters`` shows it two cycles after the
cycle it happened in.

Two options are TLM-only (their defaults are the RTL's): ``interval``, a link output of a dimension
with interval ``k`` waiting ``k - 1`` cycles after each flit
(:func:`~tlm.link.config.port_intervals`, docs/noc.md "Flit interval"), and
``ports="per_direction"``, an injection buffer per output port and an ejection register per
input port (:mod:`tlm.link.ports`).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from .config import DropKind, LinkConfig, port_intervals
from .flit import FlitKind
from .ports import Ports
from .routing import lane, out_vc, route
from .topology import LOCAL

__all__ = ["Router", "RouterOutputs", "EJECT_SLOTS"]

#: slots of an ejection port's queue: with a grant spending one and the consumer's read freeing
#: one in the cycle it happens, two keep one flit a cycle leaving (docs/noc.md, "Pipeline")
EJECT_SLOTS = 2

#: requester 0: the injection buffer (of injection port 0); requesters 1.. are the link input
#: VCs, then the injection buffers of ports 1.. under ``ports="per_direction"``
INJECTION = 0


@dataclass
class RouterOutputs:
    """What a router shows during one cycle: ``inject_ready`` and ``eject`` of port 0 (the only
    injection and ejection port of the RTL). Lists are indexed by port (index 0 unused)."""

    inject_ready: bool
    eject: int | None
    link: list
    credit: list
    counters: tuple[int, ...]


class Router:
    """One router at ``coord`` of the torus ``cfg.shape``; see the module docstring.
    ``interval`` and ``ports`` (a name of :data:`~tlm.link.ports.PORTS`, or a
    :class:`~tlm.link.ports.Ports` of ``cfg``) are :class:`~tlm.link.network.RouterNetwork`'s.

    The state, in the names of ``docs/noc.md``:

    * ``fifo[r]``: requester ``r``'s buffer (``r = 0`` the injection buffer, whose first
      ``committed[0]`` flits are checked packets; link input VC ``(port, vc)`` is requester
      :meth:`LinkConfig.requester <tlm.link.config.LinkConfig.requester>`; injection port
      ``i`` is requester ``ports.inject_requester[i]``);
    * ``alloc[r]``: the ``(output, output VC)`` its packet in progress holds, or ``None``;
    * ``busy[output][vc]``: that output VC is held by a packet (an ejection port has one, 0);
    * ``credits[port][vc]``: free slots of the next router's buffer for that output VC;
    * ``rr[output]``: the requester after the one that output last granted;
    * ``granted``, ``leaving``: this cycle's grants and the requesters whose front flit goes
      (granted or dropped): their flits leave the buffers in the next step;
    * ``link_reg``, ``credit_reg``: the output registers; ``eject_q`` (by ejection port): the
      ejection queues, whose fronts are the ejection registers (``eject_regs``), and
      ``eject_credits``, their slots not yet granted;
    * ``counters``: the drop counters, indexed by :class:`~tlm.link.config.DropKind`;
      ``drop_reg``: the drops of the last cycle, by kind, which the next step adds to them.

    Outputs are the ports ``0 .. P-1`` and, under ``ports="per_direction"``, ejection ports
    ``1 .. P-1`` after them (:class:`~tlm.link.ports.Ports`).

    Examples
    --------
    >>> cfg = LinkConfig((4, 4))
    >>> r = Router(cfg, (0, 0))
    >>> flit = cfg.fmt.head(dst=(1, 0), src=(0, 0), length=1, seq=0)
    >>> r.step(inject=flit).accepted   # injection port 0 took it
    [0]
    >>> _ = r.step(); _ = r.step(); r.outputs().link[1] == flit   # on x+ three cycles after
    True
    """

    def __init__(self, cfg: LinkConfig, coord, interval=None, ports: str | Ports = "single"):
        if not isinstance(cfg, LinkConfig):
            raise TypeError(f"cfg must be a LinkConfig, not {cfg!r}")
        coord = tuple(coord)
        if not cfg.torus.contains(coord) or len(coord) != len(cfg.shape):
            raise ValueError(f"coord must be a node of the torus {cfg.shape}, not {coord!r}")
        self.cfg = cfg
        self.coord = coord
        self.fmt = cfg.fmt
        layout = ports if isinstance(ports, Ports) and ports.cfg == cfg else Ports(cfg, ports)
        self.ports = layout
        P, V, R = cfg.ports, cfg.vcs, cfg.requesters
        # the requester of each link input VC and back, from LinkConfig's one rule
        self._requester = [None] + [[cfg.requester(p, v) for v in range(V)] for p in range(1, P)]
        self._link_of = [None] + [cfg.requester_link(r) for r in range(1, R)]
        self._link_of += [None] * (layout.requesters - R)
        # injection port of each injection requester, and the output a packet ending here takes
        self._inj_of = {r: i for i, r in enumerate(layout.inject_requester)}
        self._local = layout.local_output
        self._eject_of = {o: i for i, o in enumerate(layout.eject_output)}
        self._routes: dict[tuple[int, int], tuple[int, int] | None] = {}
        self.fifo = [deque() for _ in range(layout.requesters)]
        self.committed = [0] * layout.count
        self.alloc: list[tuple[int, int] | None] = [None] * layout.requesters
        self.busy = [[False] * V for _ in range(layout.outputs)]
        self.credits = [[cfg.depth] * V for _ in range(P)]
        #: link requesters whose FIFO holds a flit (the only ones that can ask)
        self.active: set[int] = set()
        # "nothing sent" registers, shared so that a quiet router is quick to recognise
        self._no_links = (None,) * P
        self._no_credits = (0,) * P
        self.link_reg = self._no_links
        self.credit_reg = self._no_credits
        #: each ejection port's queue: its front is the ejection register, a second slot
        #: takes the flit granted while the front waits; credits: its slots not yet granted
        self.eject_q = [deque() for _ in range(layout.count)]
        self.eject_credits = [EJECT_SLOTS] * layout.count
        #: this cycle's grants ``(requester, output, output VC)``, and every requester whose
        #: front flit was granted or dropped: they leave their buffers in the next cycle
        self.granted: list[tuple[int, int, int]] = []
        self.leaving: list[int] = []
        self._inj_fifos = [self.fifo[r] for r in layout.inject_requester]
        self.rr = [0] * layout.outputs
        self.counters = [0] * len(DropKind)
        self._no_drops = (0,) * len(DropKind)
        self.drop_reg: tuple[int, ...] | list[int] = self._no_drops
        # the flit interval: cycles each link output still waits before it may send again
        self._interval = port_intervals(cfg, interval)
        self._paced = max(self._interval) > 1
        self.wait = [0] * P
        self._checkers = [_Checker() for _ in range(layout.count)]
        self.cycle = 0

    # -- outputs ----------------------------------------------------------------------------
    @property
    def quiet(self) -> bool:
        """Nothing buffered and nothing in the output registers: with no inputs, a step would
        change nothing."""
        return (
            not self.active
            and not any(self._inj_fifos)
            and not self.leaving
            and not any(self.eject_q)
            and self.link_reg is self._no_links
            and self.credit_reg is self._no_credits
            and not (self._paced and any(self.wait))
            and self.drop_reg is self._no_drops
        )

    @property
    def inject_ready(self) -> bool:
        """Injection port 0's buffer has room (committed and pending flits both take room)."""
        return len(self.fifo[INJECTION]) < self.cfg.inject_depth

    def inject_ready_at(self, port: int) -> bool:
        """Injection port ``port``'s buffer has room."""
        return len(self.fifo[self.ports.inject_requester[port]]) < self.cfg.inject_depth

    @property
    def eject_regs(self) -> list[int | None]:
        """Each ejection port's register: the front of its queue."""
        return [q[0] if q else None for q in self.eject_q]

    @property
    def eject_reg(self) -> int | None:
        """Ejection port 0's register (the RTL's one ejection port)."""
        q = self.eject_q[0]
        return q[0] if q else None

    def outputs(self) -> RouterOutputs:
        return RouterOutputs(
            self.inject_ready,
            self.eject_reg,
            list(self.link_reg),
            list(self.credit_reg),
            tuple(self.counters),
        )

    # -- one cycle --------------------------------------------------------------------------
    def step(self, inject=None, eject_ready=True, link_in=None, credit_in=None) -> StepInfo:
        """Advance one cycle with these inputs.

        Parameters
        ----------
        inject : int or None, or dict of int to int
            The flit offered on injection port 0 (valid) or ``None``; or the flits offered on
            each injection port, by port (absent: not valid).
        eject_ready : bool or dict of int to bool
            ``ready`` of ejection port 0; or of each ejection port, by port (absent: ready).
        link_in : list of (int or None), indexed by port, or None
            Flit arriving on each link input.
        credit_in : list of int, indexed by port, or None
            Credit mask (bit per VC) arriving on each link output's credit wire.
        """
        info = StepInfo()
        if self.drop_reg is not self._no_drops:  # last cycle's drops reach their counters
            top = (1 << self.cfg.counter_bits) - 1
            for kind, n in enumerate(self.drop_reg):
                self.counters[kind] = min(self.counters[kind] + n, top)
            self.drop_reg = self._no_drops
        queues = self.eject_q
        if isinstance(eject_ready, dict):
            ready = [eject_ready.get(e, True) for e in range(len(queues))]
        else:
            ready = [eject_ready] + [True] * (len(queues) - 1)
        for e, q in enumerate(queues):
            if q and ready[e]:  # the front leaves; its slot is free for this cycle's grants
                info.ejected[e] = q.popleft()
                self.eject_credits[e] += 1
        offers = inject if isinstance(inject, dict) else {} if inject is None else {0: inject}
        inject_ready = {i: self.inject_ready_at(i) for i in offers}
        # the next registers: what is sent this cycle (nothing unless something is)
        nxt = _Next(self._no_links, self._no_credits)
        if self.leaving:  # traverse: last cycle's grants leave their buffers
            self._traverse(nxt, info)
        if credit_in is not None:  # usable by this cycle's requests
            self._return_credits(credit_in)
        if self.active or any(self.committed):
            requests, drops = self._requests()
            for r, kind in drops:
                self._leave(r, nxt)
                self._count_drop(kind)
            for port, asking in requests.items():
                winner, vc = self._arbitrate(port, asking)
                self._grant(winner, port, vc, nxt, info)
        if self._paced:  # a cycle has passed for every link output's interval
            self.wait = [w - 1 if w else 0 for w in self.wait]
        if link_in is not None:
            self._receive(link_in)
        for i, flit in offers.items():
            if flit is not None and inject_ready[i]:
                self._check_injected(i, flit)
                info.accepted.append(i)
        self.link_reg, self.credit_reg = nxt.link, nxt.credit
        self.cycle += 1
        return info

    # -- request ----------------------------------------------------------------------------
    def _requests(self):
        """Every non-empty buffer's front flit (the flit behind one granted last cycle, which
        has just left), from the state its grants left: the
        requesters asking each output with the output VC they ask for (``{output:
        [(requester, vc), ...]}``) and the front flits dropped as ``(requester, DropKind)``."""
        requests: dict[int, list[tuple[int, int]]] = {}
        drops = []
        injecting = [r for i, r in enumerate(self.ports.inject_requester) if self.committed[i]]
        ready = (*injecting, *self.active) if injecting else self.active
        for r in ready:
            flit = self.fifo[r][0]
            if self.alloc[r] is None:  # the flit must start a packet, to a node that exists
                if not self.fmt.kind(flit).starts_packet:
                    drops.append((r, DropKind.ORPHAN))
                    continue
                if self._route(flit) is None:
                    drops.append((r, DropKind.BAD_DEST))
                    continue
            want = self._request(r, flit)
            if want is not None:
                port, vc = want
                requests.setdefault(port, []).append((r, vc))
        return requests, drops

    def _request(self, r: int, flit: int) -> tuple[int, int] | None:
        """The ``(output, output VC)`` requester ``r`` asks for, or ``None`` if it must
        wait: a head needs its output VC free and a credit, a body or tail the VC its head
        took and a credit; an ejection port needs a free slot of its two-flit queue; a link
        output waits out its flit interval."""
        eject_free = self.eject_credits
        held = self.alloc[r]
        if held is not None:
            port, vc = held
            e = self._eject_of.get(port)
            if e is not None:
                ok = eject_free[e] > 0
            else:
                ok = self.credits[port][vc] > 0 and not self.wait[port]
            return held if ok else None
        port, cls = self._route(flit)
        vc = out_vc(lane(self.fmt.vc(flit), self.cfg.vcs), cls, self.cfg.vcs)
        if port == LOCAL:  # the ejection port of the link it came in on
            port = self._local[r]
            ok = eject_free[self._eject_of[port]] > 0 and not self.busy[port][0]
        else:
            ok = not self.busy[port][vc] and self.credits[port][vc] > 0 and not self.wait[port]
        return (port, vc) if ok else None

    def _route(self, head: int) -> tuple[int, int] | None:
        """``(output port, dateline class)`` of a head, or ``None`` if its destination is
        outside the torus (memoised on the head's destination and source)."""
        fmt = self.fmt
        key = (fmt.field(head, "dst"), fmt.field(head, "src"))
        found = self._routes.get(key, False)
        if found is False:
            h = fmt.decode_head(head)
            if self.cfg.torus.contains(h.dst):
                found = route(self.cfg.shape, self.coord, h.src, h.dst)
            else:
                found = None
            self._routes[key] = found
        return found

    # -- allocate and traverse --------------------------------------------------------------
    def _arbitrate(self, port: int, asking: list[tuple[int, int]]) -> tuple[int, int]:
        """Round robin: of the ``(requester, vc)`` asking, the requester nearest after the
        one ``port`` granted last."""
        R = self.ports.requesters
        start = self.rr[port]
        winner = min(asking, key=lambda want: (want[0] - start) % R)
        self.rr[port] = (winner[0] + 1) % R
        return winner

    def _grant(self, r: int, port: int, vc: int, nxt: _Next, info: StepInfo):
        """Requester ``r``'s front flit is granted ``port`` in ``vc``: the grant spends the
        credit (an ejection port: a slot of its queue), a head takes the output VC for its
        packet, a tail frees it, and a link VC's slot is credited back upstream now; the flit
        itself leaves its buffer in the next cycle (:meth:`_traverse`)."""
        flit = self.fifo[r][0]
        e = self._eject_of.get(port)
        if e is not None:
            self.eject_credits[e] -= 1
        else:
            self.credits[port][vc] -= 1
            if self._paced:
                self.wait[port] = self._interval[port]
        held = 0 if e is not None else vc  # an ejection port has one output VC
        kind = self.fmt.kind(flit)
        if kind == FlitKind.HEAD:
            self.alloc[r] = (port, vc)
            self.busy[port][held] = True
        elif kind == FlitKind.TAIL:
            self.alloc[r] = None
            self.busy[port][held] = False
        self._leave(r, nxt)
        self.granted.append((r, port, vc))
        info.grants.append((r, port, vc))

    def _leave(self, r: int, nxt: _Next):
        """Requester ``r``'s front flit is granted or dropped: it leaves its buffer next
        cycle; a link VC's slot is credited back upstream now."""
        self.leaving.append(r)
        if self._inj_of.get(r) is None:
            nxt.credit_back(*self._link_of[r])

    def _traverse(self, nxt: _Next, info: StepInfo):
        """The flits granted or dropped last cycle leave their buffers; a granted one goes,
        in its output VC, into its output's register (an ejection port: its queue)."""
        popped = {}
        for r in self.leaving:
            popped[r] = self.fifo[r].popleft()
            i = self._inj_of.get(r)
            if i is not None:
                self.committed[i] -= 1
            elif not self.fifo[r]:
                self.active.discard(r)
        for r, port, vc in self.granted:
            out = self.fmt.with_vc(popped[r], vc)
            e = self._eject_of.get(port)
            if e is not None:
                self.eject_q[e].append(out)
            else:
                nxt.send(port, out)
            info.sent[port] = out
        self.leaving, self.granted = [], []

    # -- writes: credits, link inputs, injection --------------------------------------------
    def _return_credits(self, credit_in):
        """Add the credits the next routers returned; one for a VC that holds every credit
        is not owed: ignored and counted."""
        for port in range(1, self.cfg.ports):
            mask = credit_in[port]
            if not mask:
                continue
            for vc in range(self.cfg.vcs):
                if not mask >> vc & 1:
                    continue
                if self.credits[port][vc] >= self.cfg.depth:
                    self._count_drop(DropKind.CREDIT_OVERFLOW)
                else:
                    self.credits[port][vc] += 1

    def _receive(self, link_in):
        """Write each arriving flit into its VC's buffer. One that finds the buffer full
        (after this cycle's read) was sent without a credit: dropped and counted, and the
        packet it continues ends at the last flit the buffer kept."""
        for port in range(1, self.cfg.ports):
            flit = link_in[port]
            if flit is None:
                continue
            r = self._requester[port][self.fmt.vc(flit)]
            q = self.fifo[r]
            if len(q) >= self.cfg.depth:
                self._count_drop(DropKind.NO_CREDIT)
                kind = self.fmt.kind(q[-1])
                q[-1] = self.fmt.close(q[-1])
                if len(q) == 1 and not kind.ends_packet:
                    self._close_granted(r)
                continue
            q.append(flit)
            self.active.add(r)

    def _close_granted(self, r: int):
        """The flit closed is requester ``r``'s only one and was granted this cycle (a buffer
        of one flit): its grant took or kept its output VC as for a head or body; it now ends
        the packet there, so the packet releases the VC as a tail would."""
        for g, port, vc in self.granted:
            if g == r:
                self.alloc[r] = None
                self.busy[port][0 if port in self._eject_of else vc] = False

    def _check_injected(self, port: int, flit: int):
        """Injection port ``port``'s checker: write an accepted flit, commit its packet at a
        good tail, or drop the packet (roll back) and count why (module docstring)."""
        fmt = self.fmt
        kind = fmt.kind(flit)
        buf = self.fifo[self.ports.inject_requester[port]]
        c = self._checkers[port]
        if kind.starts_packet:
            if c.open:  # the previous packet never had its tail
                self._rollback(port)
                self._count_drop(DropKind.BAD_LENGTH)
                c.open = False
            length = fmt.field(flit, "length") + 1
            bad_dest = self._route(flit) is None
            if kind == FlitKind.SINGLE:
                if bad_dest:
                    self._count_drop(DropKind.BAD_DEST)
                elif length != 1:
                    self._count_drop(DropKind.BAD_LENGTH)
                else:
                    buf.append(flit)
                    self.committed[port] = len(buf)
                return
            c.open, c.count, c.length = True, 1, length
            c.bad_dest, c.over = bad_dest, False
            if not bad_dest:
                buf.append(flit)
            return
        if not c.open:
            self._count_drop(DropKind.ORPHAN)
            return
        c.count += 1
        if kind == FlitKind.BODY:
            if c.count >= c.length:  # the tail should have come by now
                c.over = True
            elif not c.bad_dest:
                buf.append(flit)
            return
        c.open = False  # the tail
        if c.bad_dest:
            self._count_drop(DropKind.BAD_DEST)
        elif c.over or c.count != c.length:
            self._rollback(port)
            self._count_drop(DropKind.BAD_LENGTH)
        else:
            buf.append(flit)
            self.committed[port] = len(buf)

    def _rollback(self, port: int):
        buf = self.fifo[self.ports.inject_requester[port]]
        while len(buf) > self.committed[port]:
            buf.pop()

    def _count_drop(self, kind: DropKind):
        """Register a drop: its counter takes it at the end of the next cycle."""
        if self.drop_reg is self._no_drops:
            self.drop_reg = list(self._no_drops)
        self.drop_reg[kind] += 1


class _Checker:
    """An injection checker's state: the packet being written (open), its flits so far
    (count), the length its head gives, whether its destination is bad, whether it overran."""

    __slots__ = ("open", "count", "length", "bad_dest", "over")

    def __init__(self):
        self.open, self.count, self.length, self.bad_dest, self.over = False, 0, 0, False, False


class _Next:
    """The output registers a cycle writes: ``link`` and ``credit`` stay the router's shared
    "nothing" tuples until something is sent."""

    __slots__ = ("link", "credit")

    def __init__(self, link, credit):
        self.link, self.credit = link, credit

    def send(self, port: int, flit: int):
        if isinstance(self.link, tuple):
            self.link = list(self.link)
        self.link[port] = flit

    def credit_back(self, port: int, vc: int):
        if isinstance(self.credit, tuple):
            self.credit = list(self.credit)
        self.credit[port] |= 1 << vc


class StepInfo:
    """What happened in one step: the injection ports that ``accepted`` their flit, the flit
    ``ejected[e]`` by each ejection port (absent if none), the flit ``sent[o]`` into each
    output's register (absent if none), and the ``grants`` as ``(requester, output, output
    VC)``."""

    __slots__ = ("accepted", "ejected", "sent", "grants")

    def __init__(self):
        self.accepted = []
        self.ejected = {}
        self.sent = {}
        self.grants = []
