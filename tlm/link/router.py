"""Cycle-exact model of one router (:class:`hdl.link.router.Router`).

Each :meth:`Router.step` takes what is on the router's input wires during one clock cycle and
advances one clock; :meth:`Router.outputs` is what the router shows during a cycle. Every output
is a register (or, for ``inject_ready``, a function of registers only), so a bench compares
``outputs()`` with the RTL every cycle and then steps both with the same inputs.

The pipeline (``docs/noc.md``):

* **Link input.** A flit on a link input is written into the FIFO of its VC at the end of the
  cycle; it can leave the FIFO from the next cycle.
* **Injection.** A flit accepted from ``inject`` is checked and written into the injection
  buffer; a packet becomes readable in the cycle after its tail was accepted, and only if it was
  well formed (otherwise it is rolled back, dropped and counted). ``inject_ready`` is high while
  the buffer has room (committed and pending flits both take room).
* **Switch.** In each cycle every FIFO head asks for its output port: a head flit computes its
  route (:func:`~tlm.link.routing.route`) and needs its output VC free (not held by another
  packet) and a credit; a body or tail flit needs a credit on the VC its head took. The ejection
  port has one output "VC" and needs its output register empty or ``eject_ready``. Each output
  port grants one requester, round robin over all requesters (the injection buffer, then each
  VC of each link port), starting after the last one it granted. Different VCs of one input
  port may leave in the same cycle towards different outputs.
* **Output.** A granted flit is written, with its new VC, into the output register (visible
  on the link in the next cycle); its FIFO slot's credit goes back upstream in the credit
  register (also visible in the next cycle). The upstream router adds a returned credit at the
  end of the cycle it sees it.
* **Drops.** A FIFO head with no packet in progress that is a body or tail flit (orphan), or a
  head whose destination is outside the torus, is removed that cycle and counted (credit
  returned). The injection buffer never holds malformed packets.
* **Link misuse.** A flit on a link input whose VC's FIFO is full after this cycle's read (the
  neighbour sent it without a credit) is dropped and counted (``NO_CREDIT``); if the last flit
  in that FIFO is a head or body, it becomes the end of its packet (head -> single, body ->
  tail), so the packet leaves truncated but closed and holds no output VC; the rest of that
  packet then arrives as orphans. A credit returned for a VC that already holds ``depth``
  credits is ignored and counted (``CREDIT_OVERFLOW``).

So a flit takes two cycles per router; one flit alone crosses ``H`` hops and leaves the
ejection register ``2 H + 2`` cycles after it was accepted (an ``L``-flit packet injected back
to back: ``2 H + 2 L`` cycles from its head to its tail).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from .config import DropKind, LinkConfig
from .flit import FlitKind
from .routing import route

__all__ = ["Router", "RouterOutputs"]

HEAD, BODY, TAIL, SINGLE = (int(k) for k in FlitKind)


@dataclass
class RouterOutputs:
    """What a router shows during one cycle. Lists are indexed by port (index 0 unused)."""

    inject_ready: bool
    eject: int | None
    link: list
    credit: list
    counters: tuple[int, ...]


class Router:
    """One router at ``coord`` of the torus ``cfg.shape``; see the module docstring.

    Examples
    --------
    >>> cfg = LinkConfig((4, 4))
    >>> r = Router(cfg, (0, 0))
    >>> flit = cfg.fmt.head(dst=(1, 0), src=(0, 0), length=1, seq=0)
    >>> r.step(inject=flit).inject_fire
    True
    >>> _ = r.step(); r.outputs().link[1] == flit   # on the x+ link two cycles after
    True
    """

    def __init__(self, cfg: LinkConfig, coord):
        if not isinstance(cfg, LinkConfig):
            raise TypeError(f"cfg must be a LinkConfig, not {cfg!r}")
        coord = tuple(coord)
        if not cfg.torus.contains(coord) or len(coord) != len(cfg.shape):
            raise ValueError(f"coord must be a node of the torus {cfg.shape}, not {coord!r}")
        self.cfg = cfg
        self.coord = coord
        fmt = cfg.fmt
        self.fmt = fmt
        P, V, R = cfg.ports, cfg.vcs, cfg.requesters
        self._P, self._V, self._R = P, V, R
        self._vc_shift = 2
        self._vc_mask = (1 << fmt.vc_bits) - 1
        self._pay_shift = 2 + fmt.vc_bits
        self._lane_mask = cfg.lanes - 1
        self._routes: dict[int, tuple[int, int] | None] = {}
        self._route_mask = (1 << (2 * fmt.dims * fmt.coord_bits)) - 1
        self._len_shift = self._pay_shift + 2 * fmt.dims * fmt.coord_bits
        self._len_mask = (1 << fmt.len_bits) - 1
        # requester r's FIFO; r = 0 is the injection buffer (committed part readable)
        self.fifo = [deque() for _ in range(R)]
        self.inj_committed = 0
        self.alloc: list[tuple[int, int] | None] = [None] * R
        self.busy = [[False] * V for _ in range(P)]  # output VCs held (port 0 uses VC 0)
        self.credits = [[cfg.depth] * V for _ in range(P)]
        #: link requesters (r >= 1) whose FIFO holds a flit
        self.active: set[int] = set()
        self._no_links = (None,) * P  # shared "nothing sent" registers
        self._no_credits = (0,) * P
        self.link_reg = self._no_links
        self.credit_reg = self._no_credits
        self.eject_reg: int | None = None
        self.rr = [0] * P
        self.counters = [0] * len(DropKind)
        # injection checker
        self._open = False
        self._count = 0
        self._length = 0
        self._bad_dest = False
        self._over = False
        self.cycle = 0

    # -- outputs ----------------------------------------------------------------------------
    @property
    def quiet(self) -> bool:
        """Nothing buffered and nothing in the output registers: with no inputs, a step would
        change nothing."""
        return (
            not self.active
            and not self.fifo[0]
            and self.eject_reg is None
            and self.link_reg is self._no_links
            and self.credit_reg is self._no_credits
        )

    @property
    def inject_ready(self) -> bool:
        return len(self.fifo[0]) < self.cfg.inject_depth

    def outputs(self) -> RouterOutputs:
        return RouterOutputs(
            self.inject_ready,
            self.eject_reg,
            list(self.link_reg),
            list(self.credit_reg),
            tuple(self.counters),
        )

    # -- helpers ----------------------------------------------------------------------------
    def _count_drop(self, kind: DropKind):
        self.counters[kind] = min(self.counters[kind] + 1, (1 << self.cfg.counter_bits) - 1)

    def _route(self, flit: int):
        """``(port, class)`` of a head, or ``None`` if its destination is outside the torus."""
        key = (flit >> self._pay_shift) & self._route_mask  # the dst and src fields
        found = self._routes.get(key, False)
        if found is False:
            h = self.fmt.decode_head(flit)
            shape = self.cfg.shape
            if all(c < k for c, k in zip(h.dst, shape, strict=True)):
                found = route(shape, self.coord, h.src, h.dst)
            else:
                found = None
            self._routes[key] = found
        return found

    def _inject_write(self, flit: int):
        """Check one accepted injection flit; write, commit, or roll back (module docstring)."""
        kind = flit & 3
        buf = self.fifo[0]
        if kind == HEAD or kind == SINGLE:
            if self._open:  # the previous packet never had its tail
                self._rollback()
                self._count_drop(DropKind.BAD_LENGTH)
                self._open = False
            length = ((flit >> self._len_shift) & self._len_mask) + 1
            bad_dest = self._route(flit) is None
            if kind == SINGLE:
                if bad_dest:
                    self._count_drop(DropKind.BAD_DEST)
                elif length != 1:
                    self._count_drop(DropKind.BAD_LENGTH)
                else:
                    buf.append(flit)
                    self.inj_committed = len(buf)
                return
            self._open, self._count, self._length = True, 1, length
            self._bad_dest, self._over = bad_dest, False
            if not bad_dest:
                buf.append(flit)
            return
        if not self._open:
            self._count_drop(DropKind.ORPHAN)
            return
        self._count += 1
        if kind == BODY:
            if self._count >= self._length:
                self._over = True
            elif not self._bad_dest:
                buf.append(flit)
            return
        self._open = False  # tail
        if self._bad_dest:
            self._count_drop(DropKind.BAD_DEST)
        elif self._over or self._count != self._length:
            self._rollback()
            self._count_drop(DropKind.BAD_LENGTH)
        else:
            buf.append(flit)
            self.inj_committed = len(buf)

    def _rollback(self):
        buf = self.fifo[0]
        while len(buf) > self.inj_committed:
            buf.pop()

    # -- one cycle --------------------------------------------------------------------------
    def step(self, inject=None, eject_ready=True, link_in=None, credit_in=None) -> StepInfo:
        """Advance one cycle with these inputs.

        Parameters
        ----------
        inject : int or None
            The flit offered on ``inject`` (valid) or ``None``.
        eject_ready : bool
            ``ready`` of the ejection stream.
        link_in : list of (int or None), indexed by port, or None
            Flit arriving on each link input.
        credit_in : list of int, indexed by port, or None
            Credit mask (bit per VC) arriving on each link output's credit wire.
        """
        P, V, R = self._P, self._V, self._R
        fifo, alloc, credits, busy = self.fifo, self.alloc, self.credits, self.busy
        info = StepInfo()
        eject_reg = self.eject_reg
        ej_free = eject_reg is None or eject_ready
        if eject_reg is not None and eject_ready:
            info.ejected = eject_reg
        inject_ready = len(fifo[0]) < self.cfg.inject_depth
        new_link = self._no_links
        new_credit = self._no_credits
        new_eject = None if eject_ready else eject_reg
        active = self.active
        if active or self.inj_committed:
            # requests, from the state at the start of the cycle
            requests: dict[int, list[int]] = {}
            want: dict[int, tuple[int, int]] = {}
            drops = []
            for r in (0, *active) if self.inj_committed else active:
                flit = fifo[r][0]
                held = alloc[r]
                if held is None:
                    kind = flit & 3
                    if kind == BODY or kind == TAIL:
                        drops.append((r, DropKind.ORPHAN))
                        continue
                    found = self._route(flit)
                    if found is None:
                        drops.append((r, DropKind.BAD_DEST))
                        continue
                    o, cls = found
                    lane = (flit >> self._vc_shift) & self._lane_mask
                    if o == 0:
                        ov = lane
                        ok = ej_free and not busy[0][0]
                    else:
                        ov = lane + cls * (V >> 1)
                        ok = not busy[o][ov] and credits[o][ov] > 0
                else:
                    o, ov = held
                    ok = ej_free if o == 0 else credits[o][ov] > 0
                if ok:
                    requests.setdefault(o, []).append(r)
                    want[r] = (o, ov)
            if drops or requests:
                new_credit = [0] * P
            for r, kind in drops:
                q = fifo[r]
                q.popleft()
                if not q:
                    active.discard(r)
                self._count_drop(kind)
                port, vc = divmod(r - 1, V)
                new_credit[port + 1] |= 1 << vc
            for o, reqs in requests.items():
                start = self.rr[o]
                winner = min(reqs, key=lambda r: (r - start) % R)
                self.rr[o] = (winner + 1) % R
                q = fifo[winner]
                flit = q.popleft()
                _, ov = want[winner]
                kind = flit & 3
                out = (flit & ~(self._vc_mask << self._vc_shift)) | (ov << self._vc_shift)
                if winner == 0:
                    self.inj_committed -= 1
                else:
                    if not q:
                        active.discard(winner)
                    port, vc = divmod(winner - 1, V)
                    new_credit[port + 1] |= 1 << vc
                if o == 0:
                    new_eject = out
                    hold = 0
                else:
                    if new_link is self._no_links:
                        new_link = [None] * P
                    new_link[o] = out
                    credits[o][ov] -= 1
                    hold = ov
                if kind == HEAD:
                    alloc[winner] = (o, ov)
                    busy[o][hold] = True
                elif kind == TAIL:
                    alloc[winner] = None
                    busy[o][hold] = False
                info.sent[o] = out
                info.grants.append((winner, o, ov))
        # writes: returned credits, link inputs, injection
        depth = self.cfg.depth
        if credit_in is not None:
            for o in range(1, P):
                mask = credit_in[o]
                if not mask:
                    continue
                v = 0
                while mask:
                    if mask & 1:
                        if credits[o][v] >= depth:  # not owed: ignored, counted
                            self._count_drop(DropKind.CREDIT_OVERFLOW)
                        else:
                            credits[o][v] += 1
                    mask >>= 1
                    v += 1
        if link_in is not None:
            for i in range(1, P):
                flit = link_in[i]
                if flit is not None:
                    r = 1 + (i - 1) * V + ((flit >> self._vc_shift) & self._vc_mask)
                    q = fifo[r]
                    if len(q) >= depth:  # full after this cycle's read: sent without a credit
                        self._count_drop(DropKind.NO_CREDIT)
                        if not q[-1] & 2:  # a head or body leaves its packet open: close it
                            q[-1] ^= 3  # head -> single, body -> tail
                        continue
                    q.append(flit)
                    self.active.add(r)
        if inject is not None and inject_ready:
            self._inject_write(inject)
            info.inject_fire = True
        self.link_reg = new_link
        self.credit_reg = new_credit
        self.eject_reg = new_eject
        self.cycle += 1
        return info


class StepInfo:
    """What happened in one step: ``inject_fire``, the ``ejected`` flit (or None), the
    flit ``sent[o]`` into each output port's register (absent if none), and the
    ``grants`` as ``(requester, output port, output VC)``."""

    __slots__ = ("inject_fire", "ejected", "sent", "grants")

    def __init__(self):
        self.inject_fire = False
        self.ejected = None
        self.sent = {}
        self.grants = []
