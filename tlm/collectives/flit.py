"""The flit engine: a schedule's transfers as packets on the cycle-exact torus model.

Every transfer of a step becomes packets (:func:`tlm.collectives.packets.plan_step`, the one
definition the RTL bench shares) with the system preset's ``[flit]`` figures
(:class:`tlm.system.FlitLinks`), and the packets run on the cycle-exact torus model of
:mod:`tlm.link` - the routers the RTL is held to, cycle for cycle - with the preset's link rates
(a z link of the UltraServer sends a flit every 2 cycles).

Contract: a step's packets are offered the analytic engine's ``fixed_s`` (in cycles) after the
steps it waits for have ended; a step ends when its last flit leaves the network, or its HBM
traffic has moved if later (``Analytic.hbm_s_per_byte``: zero without the runtime), the
operation with its last step (``time = cycle / clock_hz``); chunks are charged as the other
engines charge them, so the three compare figure for figure. Options: ``ports``
(``"per_direction"``, the default, an injection and ejection port per link - ASSUMED, the DMA
engines feed each link on its own; ``"single"``, the RTL router's one port each), ``vcs`` (2, 4
or 8 virtual channels: ``vcs / 2`` lanes a source's packets take in turn) and ``order`` (how a
step's packets join their injection queues). Idle cycles before a step are skipped; a packet
out of order on its lane, or dropped, stops the run (docs/collectives.md, "The flit engine").

Examples
--------
>>> from tlm.collectives import Analytic, build
>>> from tlm.system import load_system
>>> server = load_system("trn2-server")
>>> ring = build("ring", "all_reduce", server)
>>> engine = FlitEngine(ring, server)
>>> t = float(engine.time_s([64 << 10], itemsize=2)[0])   # 64 KiB of bf16: 4 KiB chunks
>>> round(t * 1e6, 3), engine.flits, engine.cycles        # us; flits ejected, cycles stepped
(45.668, 33120, 2700)
>>> round(float(Analytic(ring, server).time_s([64 << 10], 2)[0]) * 1e6, 3)
45.48
"""

from __future__ import annotations

import heapq
import numbers
from collections import deque

import numpy as np
from numba import njit

from ..link.bounds import stream_cycles
from ..link.compiled import (
    CompiledNetwork,
    ends_packet_jit,
    field_node,
    idle,
    network_cycle,
    signed,
    starts_packet_jit,
)
from ..link.config import LinkConfig
from ..link.flit import ends_packet, starts_packet
from ..link.network import RouterNetwork
from ..link.ports import Ports
from .analytic import Analytic
from .packets import lane as lane_of
from .packets import plan_step, queue_order
from .schedule import Schedule

__all__ = [
    "FlitEngine",
    "FlitEngineError",
    "MAX_SENT_BYTES",
    "NETWORKS",
    "VCS",
    "flit_links",
    "link_config",
    "transfer_cycles",
]

#: The network models the engine can run on: the compiled one, driven by a compiled loop (fast),
#: and the per-router reference, driven by the same loop written in Python (the same cycles).
NETWORKS = ("compiled", "python")
#: Most bytes the busiest rank may send in one run (``size x Schedule.send_factor()``): every
#: flit is simulated, so the engine is for small sizes (2 MiB is about 33,000 flits of 64 B
#: through each busy injection port; a few seconds on the UltraServer).
MAX_SENT_BYTES = 2 << 20
#: Virtual channels per link of the engine's routers by default: the RTL router's 2, one per
#: dateline class (one lane). Trainium2's are not published.
VCS = 2
_MASK64 = (1 << 64) - 1
#: Cycles with packets in flight and no flit accepted or ejected after which a run stops: a
#: well-formed schedule never stalls (the network is deadlock-free); a dropped packet would.
STALL_CYCLES = 100_000
_STALLED = "flit engine: no flit moved for 100,000 cycles with packets in flight"
_OUT_OF_ORDER = (
    "flit engine: a packet left the network that is not the next one sent on its (source, "
    "destination, lane)"
)


class FlitEngineError(ValueError):
    """A system the flit engine cannot run on."""


def flit_links(system):
    """The system's ``[flit]`` figures, or a clear error if it is not one torus node."""
    if system.nodes != 1 or system.torus is None or system.flit is None:
        why = (
            f"{system.nodes} nodes joined by EFA"
            if system.nodes != 1
            else "a switched node"
            if system.torus is None
            else "a torus without a [flit] table"
        )
        raise FlitEngineError(
            f"system must be one torus node with a [flit] table (a server or an UltraServer: "
            f"trn2-server, trn2-ultraserver, trn1-server) for the flit engine, not "
            f"{system.name!r} ({why})"
        )
    if system.failed:
        raise FlitEngineError(
            f"system must have every link for the flit engine (its routers route by dimension "
            f"order and cannot go round a failed link), not {system.name!r}"
        )
    return system.flit


def link_config(system, vcs: int = VCS) -> LinkConfig:
    """The torus model of one torus-node ``system``: its shape, ``vcs`` virtual channels per
    link (``vcs / 2`` lanes), packets up to the preset's ``max_packet_flits``, an injection
    buffer of two packets (packets stream back to back)."""
    flit = flit_links(system)
    length = flit.max_packet_flits
    return LinkConfig(
        system.torus.shape, vcs=vcs, len_bits=length.bit_length() - 1, inject_depth=2 * length
    )


def transfer_cycles(system, src: int, dst: int, nbytes: int) -> int:
    """The zero-load closed form of a step of one transfer of ``nbytes`` bytes from chip ``src``
    to chip ``dst``: the cycle its last flit leaves the network.

    The step's fixed cost (``step_fixed_s`` plus the path's latency, as the analytic engine
    charges it, in cycles rounded to the nearest) plus :func:`tlm.link.bounds.stream_cycles` of
    its packets (:func:`~tlm.collectives.packets.plan_step` with the preset's figures) over
    its ``H`` hops, at the flit interval of the slowest dimension it crosses.

    Examples
    --------
    >>> from tlm.system import load_system
    >>> server = load_system("trn2-server")
    >>> transfer_cycles(server, 0, 5, 4096)   # 1 + 2 x 0.5 us fixed; 2 hops, 69 flits
    8092
    """
    flit = flit_links(system)
    cfg = link_config(system)
    torus = system.torus
    a, b = torus.coord(src), torus.coord(dst)
    path = system.path(src, dst)
    fixed_s = system.step_fixed_s + float(sum(system.latency_s[i] for i in path))
    k = max((flit.interval[d] for d in range(torus.dims) if a[d] != b[d]), default=1)
    plan = plan_step(cfg.fmt, [(src, dst)], [nbytes], per=flit.bytes_per_flit)
    if not plan:
        return int(round(fixed_s * flit.clock_hz))
    return int(round(fixed_s * flit.clock_hz)) + stream_cycles(
        len(path), [p.flits for p in plan], k
    )


class FlitEngine:
    """The flit model of one schedule on one torus node.

    Parameters
    ----------
    schedule : Schedule
    system : tlm.system.System
        One torus node with a ``[flit]`` table (the trn2 server or UltraServer, the trn1
        server); others raise :class:`FlitEngineError` naming the system.
    analytic : Analytic, optional
        The schedule's analytic engine on ``system`` if already built (its fixed costs).
    network : str
        ``compiled`` (:class:`~tlm.link.compiled.CompiledNetwork`, the default) or ``python``
        (the per-router :class:`~tlm.link.network.RouterNetwork`: the same cycles, slowly).
    ports : str
        Injection and ejection ports of each router (:mod:`tlm.link.ports`):
        ``per_direction`` (the default: a node feeds and drains every link at once, as its
        DMA engines are ASSUMED to) or ``single`` (one of each, the RTL router's).
    vcs : int
        Virtual channels per link of the routers, 2, 4 or 8 (``vcs / 2`` lanes; default
        :data:`VCS`, one lane).
    order : str
        How a step's packets join an injection queue
        (:data:`~tlm.collectives.packets.ORDERS`): ``transfer`` (the default) or ``packet``.

    Attributes
    ----------
    fixed_cycles : list of int
        Per step: the fixed cost in link cycles.
    flits, packets : int
        Flits and packets ejected in the last :meth:`run`.
    cycles : int
        Network cycles stepped in the last :meth:`run` (not counting those fast-forwarded).
    end_cycle : int
        The cycle the last :meth:`run` ended in.
    """

    def __init__(
        self,
        schedule: Schedule,
        system,
        analytic: Analytic | None = None,
        network: str = "compiled",
        ports: str = "per_direction",
        vcs: int = VCS,
        order: str = "transfer",
    ):
        if network not in NETWORKS:
            raise ValueError(f"network must be one of {', '.join(NETWORKS)}, not {network!r}")
        queue_order([], order)  # checks order
        self.order = order
        flit = flit_links(system)
        self.cfg = link_config(system, vcs)
        self.lanes = self.cfg.lanes
        self.ports = Ports(self.cfg, ports)
        self.schedule = schedule
        self.system = system
        self.network = network
        self.analytic = analytic if analytic is not None else Analytic(schedule, system)
        self.clock_hz = flit.clock_hz
        self.per = flit.bytes_per_flit
        self.interval = flit.interval
        self.fixed_cycles = [int(round(f * flit.clock_hz)) for f in self.analytic.fixed_s]
        self.after = [step.after for step in schedule.steps]
        self.waiters = [[] for _ in schedule.steps]
        for i, after in enumerate(self.after):
            for a in after:
                self.waiters[a].append(i)
        chips = schedule.chips  # one node: a chip's number is its torus node's
        self.routes = [
            tuple((chips[t.src], chips[t.dst]) for t in step.transfers) for step in schedule.steps
        ]
        self.units = [tuple(t.units for t in step.transfers) for step in schedule.steps]
        self._plans: dict = {}
        self._plans_for = -1  # the chunk size the memoised plans are for
        torus, fmt = self.cfg.torus, self.cfg.fmt
        # the injection port id of a packet from node a to node b (Ports: its first hop's)
        self._inj_port = np.array(
            [[self._port_id(a, b) for b in range(torus.nodes)] for a in range(torus.nodes)],
            np.int64,
        )
        # a head's source field -> node, to tell which packet an ejected head starts
        self._src_node = {
            fmt.field(fmt.head(c, c, 1, 0), "src"): n for n, c in enumerate(torus.coords())
        }
        self.flits = self.packets = self.cycles = self.end_cycle = 0
        # a head flit is the OR of these pieces: the kind (a head: every packet has 2 or more
        # flits), each coordinate, the length and the sequence number at their fields
        zero = (0,) * torus.dims
        base = fmt.head(zero, zero, 2, 0)
        len_off = fmt.offset("length")
        self._pieces = (
            signed(base ^ 1 << len_off),  # length 2 is 1 in the field: each packet sets its own
            np.array([signed(fmt.head(c, zero, 2, 0) ^ base) for c in torus.coords()]),
            np.array([signed(fmt.head(zero, c, 2, 0) ^ base) for c in torus.coords()]),
            len_off,
            fmt.offset("seq"),
            fmt.offset("vc"),
        )

    def _port_id(self, src: int, dst: int) -> int:
        torus = self.cfg.torus
        port = self.ports.injection_port(torus.coord(src), torus.coord(dst))
        return src * self.ports.count + port

    def _plan(self, step: int, chunk_bytes: int):
        """The step's packets in the order they join their injection queues (:attr:`order`),
        as arrays: source and destination nodes, flits, the head flit and the lane (memoised
        for the last chunk size: ring steps repeat one plan)."""
        if chunk_bytes != self._plans_for:
            self._plans, self._plans_for = {}, chunk_bytes
        nbytes = tuple(u * chunk_bytes for u in self.units[step])
        key = (self.routes[step], nbytes)
        found = self._plans.get(key)
        if found is None:
            plan = plan_step(self.cfg.fmt, self.routes[step], list(nbytes), per=self.per)
            plan = queue_order(plan, self.order)
            src, dst, flits, seq = (
                np.array([getattr(p, f) for p in plan], np.int64)
                for f in ("src", "dst", "flits", "seq")
            )
            lanes = np.array([lane_of(p, self.lanes) for p in plan], np.int64)
            # the heads, from the flit format's pieces (FlitFormat.head, field by field)
            base, head_dst, head_src, len_off, seq_off, vc_off = self._pieces
            heads = base | head_dst[dst] | head_src[src] | (flits - 1) << len_off | seq << seq_off
            heads |= lanes << vc_off
            found = (src, dst, flits, heads, lanes)
            self._plans[key] = found
        return found

    def run(self, chunk_bytes: int) -> float:
        """Time of the operation when every chunk is ``chunk_bytes`` bytes, in seconds.

        Parameters
        ----------
        chunk_bytes : int
            Bytes of one chunk (>= 0).
        """
        if (
            isinstance(chunk_bytes, bool)
            or not isinstance(chunk_bytes, numbers.Integral)
            or chunk_bytes < 0
        ):
            raise ValueError(f"chunk_bytes must be an integer >= 0, not {chunk_bytes!r}")
        plans = [self._plan(i, int(chunk_bytes)) for i in range(len(self.routes))]
        # per step, the cycles its HBM traffic takes (zeros where HBM is not charged)
        hbm = np.ceil(self.analytic.hbm_s_per_byte * int(chunk_bytes) * self.clock_hz)
        self._hbm_cycles = hbm.astype(np.int64)
        if self.network == "compiled":
            ends = self._run_compiled(plans)
        else:
            ends = self._run_python(plans)
        self.end_cycle = int(max(ends, default=0))
        return self.end_cycle / self.clock_hz

    def _run_compiled(self, plans):
        """:func:`_drive` on a :class:`~tlm.link.compiled.CompiledNetwork`."""
        cfg, steps = self.cfg, len(plans)
        n = cfg.torus.nodes
        net = CompiledNetwork(cfg, self.interval, self.ports.mode)
        first = np.zeros(steps + 1, np.int64)
        first[1:] = np.cumsum([len(p[0]) for p in plans])
        cat = [np.concatenate([p[k] for p in plans] or [np.zeros(0, np.int64)]) for k in range(5)]
        src, dst, flits, heads, lane = cat
        port = self._inj_port[src, dst]
        count = np.bincount(port, minlength=n * self.ports.count)
        q_first = np.concatenate([[0], np.cumsum(count)]).astype(np.int64)
        # packets are told apart per (source, destination, lane): each arrives in order
        pairs = np.bincount((src * n + dst) * self.lanes + lane, minlength=n * n * self.lanes)
        e_first = np.concatenate([[0], np.cumsum(pairs)]).astype(np.int64)
        w_first = np.zeros(steps + 1, np.int64)
        w_first[1:] = np.cumsum([len(w) for w in self.waiters])
        w_list = np.array([j for w in self.waiters for j in w], np.int64)
        fmt = cfg.fmt
        lanes = range(self.lanes)
        body = np.array([signed(fmt.body(0, vc=j)) for j in lanes], np.int64)
        tail = np.array([signed(fmt.body(0, vc=j, tail=True)) for j in lanes], np.int64)
        ends = np.zeros(steps, np.int64)
        counts = np.zeros(3, np.int64)
        _drive(
            net.state,
            net.consts,
            np.array(self.fixed_cycles, np.int64),
            self._hbm_cycles,
            np.array([len(a) for a in self.after], np.int64),
            w_first,
            w_list,
            first,
            port,
            dst,
            flits,
            heads,
            lane,
            body,
            tail,
            q_first,
            e_first,
            ends,
            counts,
        )
        self.flits, self.packets, self.cycles = (int(c) for c in counts)
        return ends.tolist()

    def _run_python(self, plans):
        """The loop of :func:`_drive`, in Python, on the per-router
        :class:`~tlm.link.network.RouterNetwork` (the reference: the same cycles)."""
        cfg = self.cfg
        fmt = cfg.fmt
        net = RouterNetwork(cfg, self.interval, self.ports.mode)
        count = self.ports.count
        body = [fmt.body(0, vc=j) for j in range(self.lanes)]
        tail = [fmt.body(0, vc=j, tail=True) for j in range(self.lanes)]
        steps = len(plans)
        waiting = [len(a) for a in self.after]
        left = [0] * steps  # packets of each offered step not yet delivered
        ends = [0] * steps
        offered = [0] * steps
        hbm = self._hbm_cycles.tolist()
        start: list[tuple[int, int]] = []  # heap of (cycle offered, step)
        # per injection port id: (head, flits, lane) of the packets to inject
        queue = [deque() for _ in range(cfg.torus.nodes * count)]
        # port id -> [head, flits, lane, next flit] of its front packet
        sending: dict[int, list] = {}
        # (src, dst, lane) -> (head, step) of its packets in the order they were sent
        expect: dict[tuple[int, int, int], deque] = {}
        receiving: dict[int, int] = {}  # ejection port id -> step of the packet it is ejecting
        in_flight = flits = packets = stepped = still = 0

        def finished(i, cycle):
            ends[i] = cycle = max(cycle, offered[i] + hbm[i])
            for j in self.waiters[i]:
                waiting[j] -= 1
                if not waiting[j]:
                    heapq.heappush(start, (cycle + max(self.fixed_cycles[j], 1), j))

        def offer(i, cycle):
            nonlocal in_flight
            offered[i] = cycle
            src, dst, length, heads, lanes = (a.tolist() for a in plans[i])
            if not src:
                finished(i, cycle)
                return
            ports = set()
            for s, d, f, h, j in zip(src, dst, length, heads, lanes, strict=True):
                q = int(self._inj_port[s, d])
                queue[q].append((h & _MASK64, f, j))
                ports.add(q)
                expect.setdefault((s, d, j), deque()).append((h & _MASK64, i))
            left[i] += len(src)
            in_flight += len(src)
            for q in ports:
                if q not in sending:
                    sending[q] = [*queue[q].popleft(), 0]

        def flit_of(s):
            head, length, j, at = s
            return head if at == 0 else tail[j] if at == length - 1 else body[j]

        for i in range(steps):
            if not waiting[i]:
                heapq.heappush(start, (self.fixed_cycles[i], i))
        cycle = 0
        while start or in_flight:
            while start and start[0][0] <= cycle:
                offer(heapq.heappop(start)[1], cycle)
            if not in_flight:
                if start and start[0][0] > cycle and net.idle:
                    cycle = start[0][0]  # nothing moves until then: skip the idle cycles
                    continue
                if not start:
                    break
            out = net.step({n: flit_of(s) for n, s in sending.items()})
            stepped += 1
            still = 0 if out.accepted or out.ejected else still + 1
            if still > STALL_CYCLES:
                raise RuntimeError(_STALLED)
            for n in out.accepted:
                s = sending[n]
                s[3] += 1
                if s[3] == s[1]:
                    if queue[n]:
                        sending[n] = [*queue[n].popleft(), 0]
                    else:
                        del sending[n]
            for n, f in out.ejected.items():
                flits += 1
                kind = fmt.field(f, "kind")
                if starts_packet(kind):
                    src = self._src_node[fmt.field(f, "src")]
                    sent = expect.get((src, n // count, fmt.field(f, "vc")))
                    if not sent:
                        raise RuntimeError(_OUT_OF_ORDER)
                    head, i = sent.popleft()
                    if f != head:  # not the packet sent first on its lane
                        raise RuntimeError(_OUT_OF_ORDER)
                    receiving[n] = i
                if ends_packet(kind):
                    i = receiving.pop(n)
                    packets += 1
                    in_flight -= 1
                    left[i] -= 1
                    if not left[i]:
                        finished(i, cycle)
            cycle += 1
        self.flits, self.packets, self.cycles = flits, packets, stepped
        return ends

    def time_s(self, size_bytes, itemsize: int) -> np.ndarray:
        """Time of the operation for each buffer size in ``size_bytes``, in seconds (one
        simulation per size; :attr:`flits` and :attr:`cycles` count the last)."""
        unit = self.analytic.chunk_bytes(np.atleast_1d(size_bytes), itemsize)
        return np.array([self.run(int(u)) for u in unit.tolist()])


@njit(cache=True)
def _finish(i, cycle, ends, w_first, w_list, waiting, fixed, start_at, offered, hbm):
    """Step ``i`` delivered its last flit in ``cycle``: it ends then, or when its HBM traffic
    (``hbm`` cycles from when it was ``offered``) has moved if later; its waiters may start.
    Returns the steps that became pending."""
    end = max(cycle, offered[i] + hbm[i])
    ends[i] = end
    pending = 0
    for w in range(w_first[i], w_first[i + 1]):
        j = w_list[w]
        waiting[j] -= 1
        if waiting[j] == 0:
            start_at[j] = end + max(fixed[j], 1)
            pending += 1
    return pending


@njit(cache=True)
def _drive(
    S,
    C,
    fixed,
    hbm,
    waiting,
    w_first,
    w_list,
    first,
    port,
    dst,
    flits,
    heads,
    lane,
    body,
    tail,
    q_first,
    e_first,
    ends,
    counts,
):
    """The flit engine's loop on a compiled network (:meth:`FlitEngine._run_python` is the same
    loop in Python): offer each step's packets when it is due, feed every injection port's queue
    one flit per cycle, tell each ejected packet's step by its order on its (source,
    destination, lane), end steps (no sooner than ``hbm`` cycles after they were offered) and
    release their waiters, skip idle cycles. ``port`` is each
    packet's injection port id (``node * IP + port``), ``lane`` its lane; ``body`` and ``tail``
    are the data flits by lane. Writes ``ends`` (per step) and ``counts`` (flits, packets,
    cycles stepped)."""
    steps = fixed.size
    N, IP, lanes = C.here.shape[0], C.IP, C.lanes
    kind_off, kind_mask = C.kind_off, C.kind_mask
    step_of = np.zeros(port.size, np.int64)
    for i in range(steps):
        step_of[first[i] : first[i + 1]] = i
    queue = np.zeros(port.size, np.int64)  # per port id, from q_first: packets in order
    q_head = q_first[:-1].copy()
    q_tail = q_first[:-1].copy()
    expect = np.zeros(port.size, np.int64)  # per (src, dst, lane), from e_first: packets
    e_head = e_first[:-1].copy()
    e_tail = e_first[:-1].copy()
    fi = np.zeros(N * IP, np.int64)  # next flit of each injection port's front packet
    receiving = np.zeros(N * IP, np.int64)  # packet each ejection port is ejecting
    left = np.zeros(steps, np.int64)
    start_at = np.full(steps, -1, np.int64)
    offered = np.zeros(steps, np.int64)
    inj_v = np.zeros((N, IP), np.bool_)
    inj_f = np.zeros((N, IP), np.int64)
    ready = np.ones((N, IP), np.bool_)
    acc = np.zeros((N, IP), np.bool_)
    ejv = np.zeros((N, IP), np.bool_)
    ejf = np.zeros((N, IP), np.int64)
    pending = 0
    for i in range(steps):
        if waiting[i] == 0:
            start_at[i] = fixed[i]
            pending += 1
    cycle = in_flight = nflits = npackets = stepped = still = 0
    while pending > 0 or in_flight > 0:
        if pending > 0:
            for i in range(steps):  # in step order, as the heap of the Python loop
                if start_at[i] < 0 or start_at[i] > cycle:
                    continue
                start_at[i] = -1
                pending -= 1
                offered[i] = cycle
                if first[i] == first[i + 1]:
                    pending += _finish(
                        i, cycle, ends, w_first, w_list, waiting, fixed, start_at, offered, hbm
                    )
                    continue
                for p in range(first[i], first[i + 1]):
                    q = port[p]
                    queue[q_tail[q]] = p
                    q_tail[q] += 1
                    pair = ((q // IP) * N + dst[p]) * lanes + lane[p]
                    expect[e_tail[pair]] = p
                    e_tail[pair] += 1
                left[i] += first[i + 1] - first[i]
                in_flight += first[i + 1] - first[i]
        if in_flight == 0:
            if pending == 0:
                break
            nxt = -1
            for i in range(steps):
                if start_at[i] >= 0 and (nxt < 0 or start_at[i] < nxt):
                    nxt = start_at[i]
            if nxt > cycle and idle(S):
                cycle = nxt  # nothing moves until then: skip the idle cycles
                continue
        for n in range(N):
            for j in range(IP):
                q = n * IP + j
                if q_head[q] < q_tail[q]:
                    p = queue[q_head[q]]
                    at = fi[q]
                    if at == 0:
                        inj_f[n, j] = heads[p]
                    elif at == flits[p] - 1:
                        inj_f[n, j] = tail[lane[p]]
                    else:
                        inj_f[n, j] = body[lane[p]]
                    inj_v[n, j] = True
                else:
                    inj_v[n, j] = False
        network_cycle(S, C, inj_v, inj_f, ready, acc, ejv, ejf)
        stepped += 1
        if acc.any() or ejv.any():
            still = 0
        else:
            still += 1
            if still > STALL_CYCLES:
                raise RuntimeError(_STALLED)
        for n in range(N):
            for j in range(IP):
                if acc[n, j]:
                    q = n * IP + j
                    fi[q] += 1
                    if fi[q] == flits[queue[q_head[q]]]:
                        fi[q] = 0
                        q_head[q] += 1
        for q in range(N * IP):
            n, j = q // IP, q % IP
            if not ejv[n, j]:
                continue
            f = ejf[n, j]
            nflits += 1
            kind = (f >> kind_off) & kind_mask
            if starts_packet_jit(kind):
                s = field_node(f, C.src_off, C.cb, C.cmask, C.shape, C.stride)
                pair = (s * N + n) * lanes + ((f >> C.vc_off) & C.vc_mask)  # its lane
                if e_head[pair] == e_tail[pair]:
                    raise RuntimeError(_OUT_OF_ORDER)
                p = expect[e_head[pair]]
                if f != heads[p]:  # not the packet sent first on its lane
                    raise RuntimeError(_OUT_OF_ORDER)
                receiving[q] = p
                e_head[pair] += 1
            if ends_packet_jit(kind):
                i = step_of[receiving[q]]
                npackets += 1
                in_flight -= 1
                left[i] -= 1
                if left[i] == 0:
                    pending += _finish(
                        i, cycle, ends, w_first, w_list, waiting, fixed, start_at, offered, hbm
                    )
        cycle += 1
    counts[0], counts[1], counts[2] = nflits, npackets, stepped
