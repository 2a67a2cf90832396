"""The world around one router: neighbours that send flits within their credits, slow
neighbours that return credits late (backpressure on every output), a local source and sink.

Used by the Amaranth-simulator lockstep tests and the cocotb router bench alike. Per cycle:
:meth:`RouterEnv.drive` gives the router's inputs (decided from the environment's own state,
never from this cycle's outputs: a source's ``valid`` never waits for ``ready``), then
:meth:`RouterEnv.observe` takes the router's outputs of the same cycle.
"""

from __future__ import annotations

from collections import deque
from itertools import combinations, product

from tlm.link.config import MALFORMED, DropKind, LinkConfig
from verif.common.patterns import pattern

from .stimulus import malformed_packet

__all__ = ["RouterEnv", "RouterInputs", "coverage", "all_pairs", "HANDOVER"]

#: The packet lengths (flits) the two requesters of a hand-over round send, in order. An output
#: VC with two credits (``depth`` 2, credits back at once) passes two flits, then waits a cycle;
#: with these lengths, whichever of the two the arbiter takes first, each one's single, head
#: and tail falls first in such a pair with the other waiting to start (a search over lengths
#: 1..3, up to four packets each, found none shorter).
HANDOVER = ((2, 1, 2, 1), (3, 1, 1, 1))


class RouterInputs:
    __slots__ = ("inject", "eject_ready", "link_in", "credit_in")

    def __init__(self, inject, eject_ready, link_in, credit_in):
        self.inject = inject
        self.eject_ready = eject_ready
        self.link_in = link_in
        self.credit_in = credit_in

    def kwargs(self):
        return {
            "inject": self.inject,
            "eject_ready": self.eject_ready,
            "link_in": self.link_in,
            "credit_in": self.credit_in,
        }


class RouterEnv:
    """Random traffic into every input of a router at ``coord``, every VC, every output.

    Parameters
    ----------
    cfg : LinkConfig
    coord : tuple of int
    rng : numpy.random.Generator
    packets : int
        Packets each input (the local port and every link port) sends.
    malformed : float
        Share of packets broken on purpose (link inputs: orphans and bad destinations;
        the local port: every :class:`~tlm.link.config.DropKind`).
    send, ready, credit : str
        Patterns: when inputs may send, when ejection is ready, when a slow neighbour returns
        a credit it owes.
    rogue : int or None
        A link port whose neighbour misuses the link: it sends whenever it has a flit, credit
        or not (the router drops what does not fit, ``DropKind.NO_CREDIT``).
    spurious : float
        Chance per cycle and link output that its neighbour returns a credit it does not owe
        (``DropKind.CREDIT_OVERFLOW`` when the router already holds every credit).
    directed_drops : bool
        Each input also sends one malformed packet of every kind it can carry (the local port
        each of :data:`~tlm.link.config.MALFORMED`, a link port a bad destination and an
        orphan), after the aimed packets: every drop kind in every run, not only by chance.
    contention : bool
        Before any other packet, pairs: for every output and every two requesters (the
        injection buffer, each link VC), two one-flit packets from each to that output, a
        pair sent once the one before has left. Each output's round-robin pointer then wraps
        with exactly two asking, which random traffic seldom makes (an arbiter's prefix OR
        that misses a term, or a priority mask wrong after the last requester, shows only
        with few requesters asking).
    handover : bool
        After the contention pairs (or first), hand-over rounds: for every output VC and every
        two requesters of its lane, packets of :data:`HANDOVER` lengths from each to that one
        output VC. The arbiter alternates between the two, so each one's grant of a single, a
        head and a tail is followed at once by the other asking to start a packet on the same
        output VC. Each requester has its own view of the output VCs' state after the last
        grants (taken by a head, kept while the packet lasts, freed by a tail, left free by a
        single); a view wrong after one other requester's grant shows only there.
    """

    def __init__(
        self,
        cfg,
        coord,
        rng,
        packets=20,
        malformed=0.1,
        *,
        send="random",
        ready="random",
        credit="random",
        rogue=None,
        spurious=0.0,
        directed_drops=False,
        contention=False,
        handover=False,
    ):
        if not isinstance(cfg, LinkConfig):
            raise TypeError(f"cfg must be a LinkConfig, not {cfg!r}")
        if rogue is not None and rogue not in range(1, cfg.ports):
            raise ValueError(f"rogue must be a link port in 1..{cfg.ports - 1}, not {rogue!r}")
        self.rogue, self.spurious = rogue, spurious
        self.cfg, self.coord, self.rng = cfg, tuple(coord), rng
        fmt, torus = cfg.fmt, cfg.torus
        P, V = cfg.ports, cfg.vcs
        self.P, self.V = P, V
        self.local = deque()
        self.bad = 0
        #: drops the router must count, by DropKind: a malformed packet at the local port
        #: counts once; on a link, a bad destination drops only the head, and the rest of
        #: that packet then arrives as orphans
        self.expected_drops = [0] * len(DropKind)
        # per link input, per VC: a queue of flits (packets contiguous within a VC)
        self.link_q = [[deque() for _ in range(V)] for _ in range(P)]
        #: well-formed packets each input sends, as flits without their VC field
        self.good = [[] for _ in range(P)]
        for port in range(P):
            vcs = range(V)  # the local port's lane comes from its head's VC field
            # first one packet to every (output, dateline class) from every VC of this input,
            # in random order, then random packets
            aimed = [(v, o, cls) for v in vcs for o in range(P) for cls in (0, 1)]
            aimed = [aimed[i] for i in rng.permutation(len(aimed))]
            kinds = MALFORMED if port == 0 else (DropKind.BAD_DEST, DropKind.ORPHAN)
            directed = list(kinds) if directed_drops else []
            for i in range(len(aimed) + len(directed) + packets):
                vc = int(rng.integers(V))
                j = i - len(aimed)  # the directed drops, then the random packets
                if 0 <= j < len(directed):
                    kind = directed[j]
                elif j >= len(directed) and rng.random() < malformed:
                    kind = kinds[int(rng.integers(len(kinds)))]
                else:
                    kind = None
                if kind is not None:
                    flits = malformed_packet(cfg, rng, torus.node(coord), kind).flits
                    self.bad += 1
                    self.expected_drops[kind] += 1
                    if port and kind == DropKind.BAD_DEST:
                        self.expected_drops[DropKind.ORPHAN] += len(flits) - 1
                elif i < len(aimed):
                    vc, o, cls = aimed[i]
                    route = self._aim(o, cls)
                    if route is None:
                        continue
                    flits = self._good(*route)
                    self.good[port].append(flits)
                else:
                    dst = torus.coord(int(rng.integers(torus.nodes)))
                    src = torus.coord(int(rng.integers(torus.nodes)))
                    flits = self._good(dst, src)
                    self.good[port].append(flits)
                flits = [fmt.with_vc(f, vc) for f in flits]
                if port == 0:
                    self.local.extend(flits)
                else:
                    self.link_q[port][vc].extend(flits)
        # the contention pairs and hand-over rounds go first: the packets above wait until the
        # last round has left
        self._rounds = deque(
            (self._pairs() if contention else []) + (self._handovers() if handover else [])
        )
        self._later = None
        if self._rounds:
            self._later = (self.local, self.link_q)
            self.local = deque()
            self.link_q = [[deque() for _ in range(V)] for _ in range(P)]
        self._in_flight = 0  # flits of the current pair not yet out of the router
        self.upstream_credits = [[cfg.depth] * V for _ in range(P)]
        self.owed = [[0] * V for _ in range(P)]  # credits the slow neighbours still owe
        self.offer = None
        self._send = [pattern(send, rng) for _ in range(P)]
        self._ready = pattern(ready, rng)
        self._credit = [pattern(credit, rng) for _ in range(P)]
        self.ejected = []
        self.sent_flits = 0
        # what left each output (port, VC), in order; the ejection port is (0, 0)
        self.out_flits: dict[tuple[int, int], list[int]] = {}

    def _good(self, dst, src):
        fmt, rng = self.cfg.fmt, self.rng
        length = int(rng.integers(1, fmt.max_length + 1))
        data = [int(x) for x in rng.integers(1 << min(fmt.payload_bits, 62), size=length - 1)]
        return fmt.packet(dst, src, length, int(rng.integers(1 << fmt.seq_bits)), data)

    def _pairs(self) -> list[list[tuple[int, int, list[int]]]]:
        """The contention rounds: per output, per two requesters, ``(port, vc, flits)`` of the
        two one-flit packets each sends to it."""
        cfg, fmt = self.cfg, self.cfg.fmt
        requesters = [(0, 0)] + [cfg.requester_link(r) for r in range(1, cfg.requesters)]
        rounds = []
        for o in range(self.P):
            routes = [self._aim(o, cls) for cls in (0, 1)]
            routes = [r for r in routes if r is not None]
            if not routes:
                continue
            for i, first in enumerate(requesters):
                for second in requesters[i + 1 :]:
                    sends = []
                    # the first in class 0, the second in class 1 where the output has both:
                    # two output VCs, two flits each, within the credits of either
                    aims = zip((first, second), (routes[0], routes[-1]), strict=True)
                    for (port, vc), (dst, src) in aims:
                        for _ in range(2):
                            flits = fmt.packet(
                                dst, src, 1, int(self.rng.integers(1 << fmt.seq_bits))
                            )
                            self.good[port].append(flits)
                            sends.append((port, vc, [fmt.with_vc(f, vc) for f in flits]))
                    rounds.append(sends)
        return rounds

    def _handovers(self) -> list[list[tuple[int, int, list[int]]]]:
        """The hand-over rounds: per output VC, per two requesters of its lane (the local port
        sends in that lane), ``(port, vc, flits)`` of the :data:`HANDOVER` packets each sends
        to it."""
        cfg, fmt, rng = self.cfg, self.cfg.fmt, self.rng
        links = [cfg.requester_link(r) for r in range(1, cfg.requesters)]
        rounds = []
        for o, cls, ln in product(range(self.P), (0, 1), range(cfg.lanes)):
            if self._aim(o, cls) is None:
                continue
            requesters = [(0, ln)] + [(p, v) for p, v in links if v % cfg.lanes == ln]
            for pair in combinations(requesters, 2):
                sends = []
                for (port, vc), lengths in zip(pair, HANDOVER, strict=True):
                    for length in lengths:
                        dst, src = self._aim(o, cls)
                        seq = int(rng.integers(1 << fmt.seq_bits))
                        data = [int(x) for x in rng.integers(1 << 30, size=length - 1)]
                        flits = fmt.packet(dst, src, length, seq, data)
                        self.good[port].append(flits)
                        sends.append((port, vc, [fmt.with_vc(f, vc) for f in flits]))
                rounds.append(sends)
        return rounds

    def _next_round(self):
        """Once the current contention pair or hand-over round has left, queue the next (or,
        after the last, every other packet)."""
        if self._in_flight:
            return
        if self._rounds:
            for port, vc, flits in self._rounds.popleft():
                (self.local if port == 0 else self.link_q[port][vc]).extend(flits)
                self._in_flight += len(flits)
        elif self._later is not None:
            local, link_q = self._later
            self._later = None
            self.local.extend(local)
            for port in range(1, self.P):
                for vc in range(self.V):
                    self.link_q[port][vc].extend(link_q[port][vc])

    def _aim(self, o, cls):
        """``(dst, src)`` of a packet that leaves this router by port ``o`` in dateline class
        ``cls``, or ``None`` if no packet can (a class forced at a ring's end)."""
        torus, rng, here = self.cfg.torus, self.rng, self.coord
        if o == 0:
            return (here, torus.coord(int(rng.integers(torus.nodes)))) if cls == 0 else None
        d, minus = divmod(o - 1, 2)
        k, c = self.cfg.shape[d], here[d]
        if k == 2 and minus:  # half way round goes +: a ring of 2 never uses its - port
            return None
        dst = list(here)
        for e in range(d + 1, torus.dims):
            dst[e] = int(rng.integers(self.cfg.shape[e]))
        dst[d] = (c - 1 if minus else c + 1) % k
        # going +: class 1 iff c == k-1 or c < s; going -: class 1 iff c == 0 or c > s
        wrap = c == (0 if minus else k - 1)
        if minus:
            choices = [s for s in range(k) if int(wrap or c > s) == cls]
        else:
            choices = [s for s in range(k) if int(wrap or c < s) == cls]
        if not choices:
            return None
        src = list(torus.coord(int(rng.integers(torus.nodes))))
        src[d] = choices[int(rng.integers(len(choices)))]
        return tuple(dst), tuple(src)

    @property
    def idle(self) -> bool:
        """Nothing left to send and no credit owed to the router: while a credit is owed the
        router may still hold a flit waiting for it (a bench that stopped counting idle
        cycles before would end with that flit inside, seed 2034447530)."""
        busy = self.local or self.offer is not None or self._rounds or self._later is not None
        busy = busy or any(q for port in self.link_q for q in port)
        busy = busy or any(any(vcs) for vcs in self.owed)
        return not busy

    def drive(self) -> RouterInputs:
        self._next_round()
        if self.offer is None and self.local and next(self._send[0]):
            self.offer = self.local.popleft()
        link_in = [None] * self.P
        credit_in = [0] * self.P
        for port in range(1, self.P):
            if next(self._send[port]):
                ready = [
                    v
                    for v in range(self.V)
                    if self.link_q[port][v]
                    and (self.upstream_credits[port][v] > 0 or port == self.rogue)
                ]
                if ready:
                    v = ready[int(self.rng.integers(len(ready)))]
                    link_in[port] = self.link_q[port][v].popleft()
                    self.upstream_credits[port][v] -= 1
                    self.sent_flits += 1
            if next(self._credit[port]):
                for v in range(self.V):
                    if self.owed[port][v]:
                        self.owed[port][v] -= 1
                        credit_in[port] |= 1 << v
            if self.spurious and self.rng.random() < self.spurious:
                credit_in[port] |= 1 << int(self.rng.integers(self.V))
        return RouterInputs(self.offer, next(self._ready), link_in, credit_in)

    def observe(self, outs, ins: RouterInputs):
        """The router showed ``outs`` while ``ins`` were driven (the same cycle)."""
        if ins.inject is not None and outs.inject_ready:
            self.offer = None
        if outs.eject is not None and ins.eject_ready:
            self._in_flight -= bool(self._in_flight)
            self.ejected.append(outs.eject)
            self.out_flits.setdefault((0, 0), []).append(outs.eject)
        for port in range(1, self.P):
            mask = outs.credit[port]
            for v in range(self.V):
                if mask >> v & 1:
                    self.upstream_credits[port][v] += 1
            flit = outs.link[port]
            if flit is not None:
                self._in_flight -= bool(self._in_flight)
                self.owed[port][self.cfg.fmt.vc(flit)] += 1
                self.out_flits.setdefault((port, self.cfg.fmt.vc(flit)), []).append(flit)

    def check_delivered(self):
        """Every well-formed packet from every input but the rogue one left the router whole
        (each output VC carries whole packets one after another)."""
        fmt = self.cfg.fmt
        left = {}
        for stream in self.out_flits.values():
            packet = []
            for flit in stream:
                packet.append(fmt.with_vc(flit, 0))
                if fmt.kind(flit).ends_packet:
                    key = tuple(packet)
                    left[key] = left.get(key, 0) + 1
                    packet = []
        missing = 0
        for port in range(self.P):
            if port == self.rogue:
                continue
            for flits in self.good[port]:
                key = tuple(fmt.with_vc(f, 0) for f in flits)
                if left.get(key):
                    left[key] -= 1
                else:
                    missing += 1
        assert not missing, f"{missing} well-formed packets from well-behaved inputs never left"

    def check_counters(self, counters):
        """The drop counters at the end: without misuse, exactly the malformed packets sent;
        with it, the injection checker's count exactly and some of each kind of misuse."""
        top = (1 << self.cfg.counter_bits) - 1
        want = [min(n, top) for n in self.expected_drops]
        if self.rogue is None and not self.spurious:
            assert list(counters) == want, f"drop counters {counters}, expected {want}"
            return
        assert counters[DropKind.BAD_LENGTH] == want[DropKind.BAD_LENGTH]
        if self.rogue is not None:
            assert counters[DropKind.NO_CREDIT] > 0, "the rogue input never overflowed"
        if self.spurious:
            assert counters[DropKind.CREDIT_OVERFLOW] > 0, "no credit was ever refused"


def coverage(cfg: LinkConfig, grants) -> set:
    """The (input port, input VC, output port, output VC) a set of TLM grants exercised;
    the injection buffer is input port 0, VC 0."""
    seen = set()
    for r, o, ov in grants:
        if r == 0:
            seen.add((0, 0, o, ov))
        else:
            port, vc = divmod(r - 1, cfg.vcs)
            seen.add((port + 1, vc, o, ov))
    return seen


def all_pairs(cfg: LinkConfig, coord) -> set:
    """Every (input port, input VC, output port, output VC) the router at ``coord`` can use
    (the ejection port's "VC" is the lane; a link input keeps its VC's lane; a class the
    dateline rule forces at a ring's end and the ``-`` port of a ring of 2 are left out)."""
    pairs = set()
    ins = [(0, 0)] + [(p, v) for p in range(1, cfg.ports) for v in range(cfg.vcs)]
    for p, v in ins:
        lanes = range(cfg.lanes) if p == 0 else [v % cfg.lanes]
        for lane in lanes:
            pairs.add((p, v, 0, lane))
            for o in range(1, cfg.ports):
                d, minus = divmod(o - 1, 2)
                k, c = cfg.shape[d], coord[d]
                if k == 2 and minus:
                    continue
                wrap = c == (0 if minus else k - 1)
                for cls in (0, 1):
                    if wrap and cls == 0:
                        continue
                    pairs.add((p, v, o, lane + cls * cfg.lanes))
    return pairs
