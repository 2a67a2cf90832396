"""The network model compiled: :class:`~tlm.link.network.RouterNetwork`'s cycle rules in numba.

:class:`CompiledNetwork` holds every router's registers and buffers in flat arrays and advances
the whole network one cycle in one compiled call; :func:`run_load` runs a whole load study
(:class:`~tlm.link.sources.LoadSources`' packets, injection queues, ejection bookkeeping,
latencies and link counts) in one compiled loop, with no Python work per cycle. Both compute
exactly what the per-router model does: the rules are :mod:`tlm.link.router`'s (routing with
dateline classes, VC allocation, round-robin switch allocation over the requesters, credits,
the injection checker with roll-back and drop counters, link misuse: a flit sent without a
credit dropped and its packet closed, a credit not owed ignored; ejection backpressure), and
``tests/test_tlm_link_compiled.py`` holds the two side by side, register for register, and checks
``simulate(engine="compiled") == simulate(engine="python")`` for every traffic pattern.

The cycle loop is written again here, tuned for speed (flat arrays, ring buffers, one pass
per router), and held to the reference, :mod:`tlm.link.router` (the readable definition), by
those tests. The rules it applies are not written again: routes come from a table that
:func:`tlm.link.routing.route` fills for every (router, destination) and
:func:`~tlm.link.routing.dateline_class` for every (port, coordinate, source coordinate); the
output VC is :func:`~tlm.link.routing.out_vc` of :func:`~tlm.link.routing.lane`, and the kind
rules :func:`~tlm.link.flit.starts_packet`, :func:`~tlm.link.flit.ends_packet` and
:func:`~tlm.link.flit.closed_kind`, each the very Python function compiled by ``numba.njit``;
requester indices come from :meth:`LinkConfig.requester <tlm.link.config.LinkConfig.requester>`
(as tables); field positions and masks from :meth:`FlitFormat.offset
<tlm.link.flit.FlitFormat.offset>` and :meth:`~tlm.link.flit.FlitFormat.mask`, passed in as
constants; the flits of a load study's packets from the encoder of
:class:`~tlm.link.flit.FlitFormat`. Flits are held as ``int64`` bit patterns, so the
flit width is at most 64 bits. Kernels are compiled on first use and cached on disk
(``cache=True``): the first call in a fresh environment takes some seconds.

Both options of the network models are here too: the links' flit ``interval`` and the
injection and ejection ``ports`` (:mod:`tlm.link.ports`: tables of which requester is an
injection buffer and which output an ejection port, from :class:`~tlm.link.ports.Ports`).
Kernels that drive a network in their own loop (the flit engine's,
:mod:`tlm.collectives.flit`) call :func:`network_cycle` on :class:`State` and :class:`Consts`
and read flits with :func:`field_node`, :func:`starts_packet_jit` and :func:`ends_packet_jit`.
"""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

import numpy as np
from numba import njit

from . import routing
from .config import DropKind, LinkConfig, port_intervals
from .flit import FlitKind, closed_kind, ends_packet, starts_packet
from .network import NetStep, injection_port_id
from .ports import Ports
from .router import EJECT_SLOTS
from .routing import dateline_class, route
from .topology import LOCAL

__all__ = [
    "CompiledNetwork",
    "Consts",
    "State",
    "network_cycle",
    "ends_packet_jit",
    "field_node",
    "idle",
    "run_load",
    "signed",
    "starts_packet_jit",
]

HEAD, TAIL = int(FlitKind.HEAD), int(FlitKind.TAIL)
# the rules of tlm.link.flit and tlm.link.routing, compiled: the same functions, not copies
_jit = njit(cache=True, inline="always")
#: :func:`tlm.link.flit.starts_packet` compiled (for kernels that read ejected flits)
starts_packet_jit = _jit(starts_packet)
#: :func:`tlm.link.flit.ends_packet` compiled
ends_packet_jit = _jit(ends_packet)
_closed_kind = _jit(closed_kind)
_lane = _jit(routing.lane)
_out_vc = _jit(routing.out_vc)
_MASK64 = (1 << 64) - 1
# columns of the injection checker's state
_OPEN, _COUNT, _LENGTH, _BAD_DEST, _OVER = range(5)


class Consts(NamedTuple):
    """What the kernels read and never write: sizes, field positions, tables."""

    P: int  # ports
    V: int  # VCs per link
    R: int  # requesters: injection port 0, each VC of each link port, injection ports 1..
    IP: int  # injection (and ejection) ports per node (tlm.link.ports.Ports.count)
    OUT: int  # switch outputs: ports 0..P-1, then ejection ports 1..IP-1
    D: int  # FIFO depth per VC (a power of two)
    DI: int  # injection buffer depth (a power of two)
    lanes: int
    kind_off: int  # bit position of the kind field
    kind_mask: int
    vc_off: int  # bit position of the VC field
    vc_mask: int
    dst_off: int  # bit positions of a head's fields
    src_off: int
    len_off: int
    len_mask: int
    cb: int  # coordinate bits
    cmask: int
    top: int  # saturation value of a drop counter
    bad_dest: int  # DropKind indices of the counters
    bad_length: int
    orphan: int
    no_credit: int
    credit_overflow: int
    shape: np.ndarray  # [dims]
    stride: np.ndarray  # [dims]: node = sum(coord * stride)
    here: np.ndarray  # [N, dims]: each router's coordinate
    route_port: np.ndarray  # [N, N]: output port at router m for destination node n
    port_dim: np.ndarray  # [P]: dimension of a link port
    dateline: np.ndarray  # [P, max k, 2**cb]: VC class leaving coordinate c from source s
    peer_node: np.ndarray  # [N, P]: the router at the other end of each link port
    peer_port: np.ndarray  # [P]: the port it enters there
    rq_port: np.ndarray  # [R]: link port of a requester (0 for the injection buffer)
    rq_vc: np.ndarray  # [R]: VC of a requester
    rq_index: np.ndarray  # [P, V]: requester of each link input VC (row 0 unused)
    interval: np.ndarray  # [P]: cycles per flit of each output's link (port_intervals)
    rq_inj: np.ndarray  # [R]: injection port of a requester, -1 for a link VC
    inj_rq: np.ndarray  # [IP]: requester of each injection port
    local_out: np.ndarray  # [R]: output of a packet that ends here (Ports.local_output)
    out_ej: np.ndarray  # [OUT]: ejection port of an output, -1 for a link


class State(NamedTuple):
    """Every router's registers and buffers, indexed by node first."""

    buf: np.ndarray  # [N, R, max(D, DI)] int64: FIFO contents (ring buffers)
    qhead: np.ndarray  # [N, R]: read position
    qcnt: np.ndarray  # [N, R]: flits held (injection buffers: committed and pending)
    committed: np.ndarray  # [N, IP]: committed flits of each injection buffer
    alloc_port: np.ndarray  # [N, R]: output a packet in progress holds, -1 none
    alloc_vc: np.ndarray  # [N, R]
    busy: np.ndarray  # [N, OUT, V] bool: output VC held by a packet
    cred: np.ndarray  # [N, P, V]: credits
    lreg: np.ndarray  # [N, P] int64: link output registers
    lval: np.ndarray  # [N, P] bool
    creg: np.ndarray  # [N, P]: credit masks going back upstream
    ejreg: np.ndarray  # [N, IP] int64: ejection registers (the fronts of the ejection queues)
    ejval: np.ndarray  # [N, IP] bool
    ejreg2: np.ndarray  # [N, IP] int64: the second slot of each ejection queue
    ejval2: np.ndarray  # [N, IP] bool
    ejcred: np.ndarray  # [N, IP]: slots of each ejection queue not yet granted
    gnt_port: np.ndarray  # [N, R]: output granted this cycle, -1 none (it traverses next)
    gnt_vc: np.ndarray  # [N, R]: its output VC
    leave: np.ndarray  # [N, R] bool: the front flit was granted or dropped: it leaves next
    rr: np.ndarray  # [N, OUT]: round-robin pointer of each output
    counters: np.ndarray  # [N, len(DropKind)]
    drop_reg: np.ndarray  # [N, len(DropKind)]: last cycle's drops, added to counters next
    check: np.ndarray  # [N, IP, 5]: injection checkers (open, count, length, bad dest, over)
    link_flits: np.ndarray  # [N, P]: flits sent on each output (port 0: ejected)
    wait: np.ndarray  # [N, P]: cycles each link output still waits out its flit interval
    # scratch: this cycle's inputs from the neighbours, the requests of one router
    lin_f: np.ndarray
    lin_v: np.ndarray
    cin: np.ndarray
    req: np.ndarray  # [3, R]: requester, output, output VC
    best: np.ndarray  # [2, OUT]: round-robin distance and request index of each output
    inj_ready: np.ndarray  # [IP] bool: this router's injection buffers have room


def route_table(cfg: LinkConfig) -> np.ndarray:
    """``[m, n]``: the output port at router ``m`` for destination node ``n``, a byte each
    (4 GiB at 65,536 nodes, where int64 took 32). The port depends on the coordinates only
    through their difference round each ring, so :func:`route` is asked once per
    displacement and the table filled from that, a block of routers at a time."""
    torus = cfg.torus
    shape = np.asarray(cfg.shape)
    origin = (0,) * torus.dims  # the output port does not depend on the source either
    by_shift = np.array(
        [route(cfg.shape, origin, origin, shift)[0] for shift in torus.coords()], np.int8
    )
    coords = np.array(torus.coords(), np.int64)
    strides = np.cumprod([1, *cfg.shape[:-1]])
    table = np.empty((torus.nodes, torus.nodes), np.int8)
    block = max(1, (1 << 22) // torus.nodes)
    for m0 in range(0, torus.nodes, block):
        here = coords[m0 : m0 + block, None, :]
        shift = (coords[None, :, :] - here) % shape
        table[m0 : m0 + block] = by_shift[(shift * strides).sum(axis=2)]
    return table


@lru_cache(maxsize=16)
def _tables(cfg: LinkConfig):
    """Routing tables of ``cfg``'s torus, filled by the routing rules of :mod:`.routing`."""
    torus, fmt = cfg.torus, cfg.fmt
    N, P = torus.nodes, cfg.ports
    route_port = route_table(cfg)
    port_dim = np.zeros(P, np.int64)
    dateline = np.zeros((P, max(cfg.shape), 1 << fmt.coord_bits), np.int64)
    for port in range(1, P):
        d, side = divmod(port - 1, 2)
        port_dim[port] = d
        k = cfg.shape[d]
        for c in range(k):
            for s in range(1 << fmt.coord_bits):
                dateline[port, c, s] = dateline_class(c, s, k, side == 0)
    peer_node = np.zeros((N, P), np.int64)
    peer_port = np.zeros(P, np.int64)
    for node, port, peer, pport in torus.links():
        peer_node[node, port], peer_port[port] = peer, pport
    return route_port, port_dim, dateline, peer_node, peer_port


def make_consts(cfg: LinkConfig, interval=None, ports: str = "single") -> Consts:
    """The kernels' constants for ``cfg`` (flits of at most 64 bits), the links' flit
    ``interval`` per dimension (:func:`~tlm.link.config.port_intervals`) and the injection and
    ejection ``ports`` (:class:`~tlm.link.ports.Ports`)."""
    if not isinstance(cfg, LinkConfig):
        raise TypeError(f"cfg must be a LinkConfig, not {cfg!r}")
    if cfg.width > 64:
        raise ValueError(
            f"width must be at most 64 bits for the compiled engine, not {cfg.width!r}"
        )
    fmt, torus = cfg.fmt, cfg.torus
    layout = Ports(cfg, ports)
    P, V, R = cfg.ports, cfg.vcs, cfg.requesters
    rq_inj = np.full(layout.requesters, -1, np.int64)
    rq_inj[list(layout.inject_requester)] = np.arange(layout.count)
    out_ej = np.full(layout.outputs, -1, np.int64)
    out_ej[list(layout.eject_output)] = np.arange(layout.count)
    # link requester indices are LinkConfig's; the injection buffers after them have no link
    rq_link = [cfg.requester_link(r) if 1 <= r < R else (0, 0) for r in range(layout.requesters)]
    route_port, port_dim, dateline, peer_node, peer_port = _tables(cfg)
    intervals = np.array(port_intervals(cfg, interval), np.int64)
    stride = np.cumprod((1,) + cfg.shape[:-1]).astype(np.int64)
    return Consts(
        P=cfg.ports,
        V=V,
        R=layout.requesters,
        IP=layout.count,
        OUT=layout.outputs,
        D=cfg.depth,
        DI=cfg.inject_depth,
        lanes=cfg.lanes,
        kind_off=fmt.offset("kind"),
        kind_mask=fmt.mask("kind"),
        vc_off=fmt.offset("vc"),
        vc_mask=fmt.mask("vc"),
        dst_off=fmt.offset("dst"),
        src_off=fmt.offset("src"),
        len_off=fmt.offset("length"),
        len_mask=fmt.mask("length"),
        cb=fmt.coord_bits,
        cmask=(1 << fmt.coord_bits) - 1,
        top=(1 << cfg.counter_bits) - 1,
        bad_dest=int(DropKind.BAD_DEST),
        bad_length=int(DropKind.BAD_LENGTH),
        orphan=int(DropKind.ORPHAN),
        no_credit=int(DropKind.NO_CREDIT),
        credit_overflow=int(DropKind.CREDIT_OVERFLOW),
        shape=np.array(cfg.shape, np.int64),
        stride=stride,
        here=np.array(torus.coords(), np.int64),
        route_port=route_port,
        port_dim=port_dim,
        dateline=dateline,
        peer_node=peer_node,
        peer_port=peer_port,
        rq_port=np.array([p for p, _ in rq_link], np.int64),
        rq_vc=np.array([v for _, v in rq_link], np.int64),
        rq_index=np.array(
            [[0] * V] + [[cfg.requester(p, v) for v in range(V)] for p in range(1, P)], np.int64
        ),
        interval=intervals,
        rq_inj=rq_inj,
        inj_rq=np.array(layout.inject_requester, np.int64),
        local_out=np.array(layout.local_output, np.int64),
        out_ej=out_ej,
    )


def make_state(cfg: LinkConfig, ports: str = "single") -> State:
    """Every router of ``cfg`` after reset: empty buffers, all credits, nothing held."""
    layout = Ports(cfg, ports)
    N, P, V = cfg.torus.nodes, cfg.ports, cfg.vcs
    R, IP, OUT = layout.requesters, layout.count, layout.outputs
    alloc = np.full((N, R), -1, np.int64)
    return State(
        buf=np.zeros((N, R, max(cfg.depth, cfg.inject_depth)), np.int64),
        qhead=np.zeros((N, R), np.int64),
        qcnt=np.zeros((N, R), np.int64),
        committed=np.zeros((N, IP), np.int64),
        alloc_port=alloc,
        alloc_vc=np.zeros((N, R), np.int64),
        busy=np.zeros((N, OUT, V), np.bool_),
        cred=np.full((N, P, V), cfg.depth, np.int64),
        lreg=np.zeros((N, P), np.int64),
        lval=np.zeros((N, P), np.bool_),
        creg=np.zeros((N, P), np.int64),
        ejreg=np.zeros((N, IP), np.int64),
        ejval=np.zeros((N, IP), np.bool_),
        ejreg2=np.zeros((N, IP), np.int64),
        ejval2=np.zeros((N, IP), np.bool_),
        ejcred=np.full((N, IP), EJECT_SLOTS, np.int64),
        gnt_port=np.full((N, R), -1, np.int64),
        gnt_vc=np.zeros((N, R), np.int64),
        leave=np.zeros((N, R), np.bool_),
        rr=np.zeros((N, OUT), np.int64),
        counters=np.zeros((N, len(DropKind)), np.int64),
        drop_reg=np.zeros((N, len(DropKind)), np.int64),
        check=np.zeros((N, IP, 5), np.int64),
        link_flits=np.zeros((N, P), np.int64),
        wait=np.zeros((N, P), np.int64),
        lin_f=np.zeros((N, P), np.int64),
        lin_v=np.zeros((N, P), np.bool_),
        cin=np.zeros((N, P), np.int64),
        req=np.zeros((3, R), np.int64),
        best=np.zeros((2, OUT), np.int64),
        inj_ready=np.zeros(IP, np.bool_),
    )


# -- kernels ----------------------------------------------------------------------------------
# The hot loop takes its arrays as plain local variables, unpacked once per cycle: an array
# read out of a tuple inside a branchy function costs a reference-count update each time.
@njit(cache=True, inline="always")
def field_node(flit, off, cb, cmask, shape, stride):
    """Node of the coordinate field at bit ``off`` of ``flit``, or -1 if a coordinate lies
    outside the torus (:meth:`Torus.node_of_field <tlm.link.topology.Torus.node_of_field>`).

    Parameters
    ----------
    flit : int64
        The flit's bits.
    off : int
        Bit position of the field (``Consts.dst_off`` or ``Consts.src_off``).
    cb, cmask, shape, stride
        ``Consts``' coordinate bits, mask, ring sizes and node strides.
    """
    node = 0
    for d in range(shape.size):
        c = (flit >> (off + d * cb)) & cmask
        if c >= shape[d]:
            return -1
        node += c * stride[d]
    return node


@njit(cache=True, inline="always")
def _pop(buf, qhead, qcnt, m, r, size):
    """Remove and return the head of requester ``r``'s FIFO (of ``size`` slots)."""
    h = qhead[m, r]
    qhead[m, r] = (h + 1) & (size - 1)
    qcnt[m, r] -= 1
    return buf[m, r, h]


@njit(cache=True, inline="always")
def _bump(drop_reg, m, kind):
    """Register a drop of ``kind`` at router ``m``: its counter takes it next cycle."""
    drop_reg[m, kind] += 1


@njit(cache=True, inline="always")
def _with_field(flit, off, mask, value):
    """``flit`` with the field at ``off`` (of ``mask``) replaced by ``value``."""
    return (flit & ~(mask << off)) | (value << off)


@njit(cache=True, inline="always")
def _inject_append(buf, qhead, qcnt, m, r, flit, DI):
    buf[m, r, (qhead[m, r] + qcnt[m, r]) & (DI - 1)] = flit
    qcnt[m, r] += 1


@njit(cache=True)
def idle(S):
    """:attr:`CompiledNetwork.idle`: nothing buffered, no register holding anything, no link
    waiting out its interval (for kernels that drive a network)."""
    busy = S.qcnt.any() or S.lval.any() or S.creg.any() or S.ejval.any() or S.wait.any()
    return not (busy or S.drop_reg.any() or S.leave.any())


@njit(cache=True)
def network_cycle(S, C, inj_v, inj_f, ready, acc, ejv, ejf):
    """One network cycle (:meth:`tlm.link.network.RouterNetwork.step`): every router reads its
    neighbours' registers, then steps as :meth:`tlm.link.router.Router.step` does.

    Parameters
    ----------
    S : State
        The network's registers and buffers (:func:`make_state`), advanced in place.
    C : Consts
        Its constants (:func:`make_consts`).
    inj_v, inj_f : ndarray [N, IP] of bool, int64
        Each injection port's valid and offered flit.
    ready : ndarray [N, IP] of bool
        Each ejection port's ready.
    acc : ndarray [N, IP] of bool
        Written: each injection port took its flit.
    ejv, ejf : ndarray [N, IP] of bool, int64
        Written: each ejection port delivered a flit, and which.
    """
    P, V, R, IP, OUT, D, DI, top = C.P, C.V, C.R, C.IP, C.OUT, C.D, C.DI, C.top
    kind_off, kind_mask = C.kind_off, C.kind_mask
    vc_off, vc_mask, dst_off, src_off = C.vc_off, C.vc_mask, C.dst_off, C.src_off
    cb, cmask, shape, stride, here = C.cb, C.cmask, C.shape, C.stride, C.here
    route_port, port_dim, dateline = C.route_port, C.port_dim, C.dateline
    peer_node, peer_port, rq_port, rq_vc = C.peer_node, C.peer_port, C.rq_port, C.rq_vc
    rq_index, interval, wait = C.rq_index, C.interval, S.wait
    rq_inj, inj_rq, local_out, out_ej = C.rq_inj, C.inj_rq, C.local_out, C.out_ej
    buf, qhead, qcnt, committed = S.buf, S.qhead, S.qcnt, S.committed
    alloc_port, alloc_vc, busy, cred = S.alloc_port, S.alloc_vc, S.busy, S.cred
    lreg, lval, creg, ejreg, ejval, rr = S.lreg, S.lval, S.creg, S.ejreg, S.ejval, S.rr
    counters, drop_reg, ck, link_flits = S.counters, S.drop_reg, S.check, S.link_flits
    lin_f, lin_v, cin, req, best = S.lin_f, S.lin_v, S.cin, S.req, S.best
    inj_ready = S.inj_ready
    ejreg2, ejval2, ejcred = S.ejreg2, S.ejval2, S.ejcred
    gnt_port, gnt_vc, leave = S.gnt_port, S.gnt_vc, S.leave
    bad_dest, bad_length, orphan = C.bad_dest, C.bad_length, C.orphan
    len_off, len_mask = C.len_off, C.len_mask
    no_credit, credit_overflow = C.no_credit, C.credit_overflow
    N = here.shape[0]
    for m in range(N):
        for p in range(1, P):
            peer, q = peer_node[m, p], peer_port[p]
            lin_v[m, p] = lval[peer, q]
            lin_f[m, p] = lreg[peer, q]
            cin[m, p] = creg[peer, q]
    for m in range(N):
        for k in range(drop_reg.shape[1]):  # last cycle's drops reach their counters
            if drop_reg[m, k]:
                counters[m, k] = min(counters[m, k] + drop_reg[m, k], top)
                drop_reg[m, k] = 0
        for e in range(IP):
            taken = ejval[m, e] and ready[m, e]
            ejv[m, e] = taken
            ejf[m, e] = ejreg[m, e]
            if taken:  # the front leaves; its slot is free for this cycle's grants
                ejcred[m, e] += 1
                ejreg[m, e], ejval[m, e] = ejreg2[m, e], ejval2[m, e]
                ejval2[m, e] = False
            inj_ready[e] = qcnt[m, inj_rq[e]] < DI
        for p in range(P):
            lval[m, p] = False
            creg[m, p] = 0
        # traverse: last cycle's grants (and drops) leave their buffers
        for r in range(R):
            if not leave[m, r]:
                continue
            leave[m, r] = False
            j = rq_inj[r]
            if j >= 0:
                flit = _pop(buf, qhead, qcnt, m, r, DI)
                committed[m, j] -= 1
            else:
                flit = _pop(buf, qhead, qcnt, m, r, D)
            o = gnt_port[m, r]
            if o < 0:  # a dropped flit
                continue
            gnt_port[m, r] = -1
            out = _with_field(flit, vc_off, vc_mask, gnt_vc[m, r])
            if o == 0 or o >= P:  # an ejection port: into its queue
                e = out_ej[o]
                if ejval[m, e]:
                    ejreg2[m, e], ejval2[m, e] = out, True
                else:
                    ejreg[m, e], ejval[m, e] = out, True
                link_flits[m, 0] += 1  # every ejection port counts as port 0
            else:
                lreg[m, o] = out
                lval[m, o] = True
                link_flits[m, o] += 1
        # returned credits, usable by this cycle's requests
        for o in range(1, P):
            mask = cin[m, o]
            v = 0
            while mask:
                if mask & 1:
                    if cred[m, o, v] >= D:  # not owed: ignored, counted
                        _bump(drop_reg, m, credit_overflow)
                    else:
                        cred[m, o, v] += 1
                mask >>= 1
                v += 1
        # requests, from the state the last grants left (a drop leaves next cycle)
        nreq = 0
        for r in range(R):
            if qcnt[m, r] == 0:  # an injection buffer's committed flits are among these
                continue
            i = rq_inj[r]
            if i >= 0 and committed[m, i] == 0:
                continue
            flit = buf[m, r, qhead[m, r]]
            o = alloc_port[m, r]
            if o < 0:  # no packet in progress: the flit must start one
                kind = (flit >> kind_off) & kind_mask
                node = field_node(flit, dst_off, cb, cmask, shape, stride)
                drop = -1 if starts_packet_jit(kind) else orphan
                if drop < 0 and node < 0:
                    drop = bad_dest
                if drop >= 0:  # only a link FIFO can hold these
                    leave[m, r] = True
                    creg[m, rq_port[r]] |= 1 << rq_vc[r]
                    _bump(drop_reg, m, drop)
                    continue
                o = route_port[m, node]
                cls = 0  # the ejection port: route() gives class 0
                if o != 0:
                    d = port_dim[o]
                    s = (flit >> (src_off + d * cb)) & cmask
                    cls = dateline[o, here[m, d], s]
                ov = _out_vc(_lane((flit >> vc_off) & vc_mask, V), cls, V)
                if o == 0:  # the ejection port of the link it came in on
                    o = local_out[r]
                    ok = ejcred[m, out_ej[o]] > 0 and not busy[m, o, 0]
                else:
                    ok = (not busy[m, o, ov]) and cred[m, o, ov] > 0 and wait[m, o] == 0
            else:
                ov = alloc_vc[m, r]
                if o == 0 or o >= P:  # an ejection port
                    ok = ejcred[m, out_ej[o]] > 0
                else:
                    ok = cred[m, o, ov] > 0 and wait[m, o] == 0
            if ok:
                req[0, nreq], req[1, nreq], req[2, nreq] = r, o, ov
                nreq += 1
        # one round-robin arbiter per output: the requester nearest after its pointer
        if nreq:
            for o in range(OUT):
                best[0, o] = R
            for i in range(nreq):
                o = req[1, i]
                key = req[0, i] - rr[m, o]
                if key < 0:
                    key += R
                if key < best[0, o]:
                    best[0, o], best[1, o] = key, i
            for o in range(OUT):
                if best[0, o] == R:
                    continue
                i = best[1, o]
                r, ov = req[0, i], req[2, i]
                rr[m, o] = r + 1 if r + 1 < R else 0
                # the grant: the flit leaves its buffer next cycle, its slot is credited
                # back now, the credit (an ejection queue's slot) is spent now
                leave[m, r] = True
                gnt_port[m, r], gnt_vc[m, r] = o, ov
                if rq_inj[r] < 0:
                    creg[m, rq_port[r]] |= 1 << rq_vc[r]
                size = DI if rq_inj[r] >= 0 else D
                flit = buf[m, r, qhead[m, r] & (size - 1)]
                kind = (flit >> kind_off) & kind_mask
                if o == 0 or o >= P:  # an ejection port
                    ejcred[m, out_ej[o]] -= 1
                    hold = 0
                else:
                    cred[m, o, ov] -= 1
                    wait[m, o] = interval[o]
                    hold = ov
                if kind == HEAD:
                    alloc_port[m, r], alloc_vc[m, r] = o, ov
                    busy[m, o, hold] = True
                elif kind == TAIL:
                    alloc_port[m, r] = -1
                    busy[m, o, hold] = False
        for o in range(1, P):  # a cycle has passed for every link output's interval
            if wait[m, o]:
                wait[m, o] -= 1
        # writes: link inputs, injection
        for i in range(1, P):
            if lin_v[m, i]:
                flit = lin_f[m, i]
                r = rq_index[i, (flit >> vc_off) & vc_mask]
                n = qcnt[m, r]
                if n >= D:  # full after this cycle's read: sent without a credit
                    _bump(drop_reg, m, no_credit)
                    # the packet it continues ends at the last flit the FIFO kept
                    last = (qhead[m, r] + n - 1) & (D - 1)
                    kept = buf[m, r, last]
                    kind = (kept >> kind_off) & kind_mask
                    buf[m, r, last] = _with_field(kept, kind_off, kind_mask, _closed_kind(kind))
                    o = gnt_port[m, r]
                    if n == 1 and o >= 0 and not ends_packet_jit(kind):
                        # granted this cycle as a head or body: the packet ends there
                        alloc_port[m, r] = -1
                        busy[m, o, 0 if o == 0 or o >= P else gnt_vc[m, r]] = False
                    continue
                buf[m, r, (qhead[m, r] + n) & (D - 1)] = flit
                qcnt[m, r] += 1
        for j in range(IP):
            fire = inj_v[m, j] and inj_ready[j]
            acc[m, j] = fire
            if not fire:
                continue
            # injection port j's checker (Router._check_injected): write, commit or roll back
            r = inj_rq[j]
            flit = inj_f[m, j]
            kind = (flit >> kind_off) & kind_mask
            if starts_packet_jit(kind):
                if ck[m, j, _OPEN]:  # the previous packet never had its tail: roll back
                    qcnt[m, r] = committed[m, j]
                    _bump(drop_reg, m, bad_length)
                    ck[m, j, _OPEN] = 0
                length = ((flit >> len_off) & len_mask) + 1
                bad = field_node(flit, dst_off, cb, cmask, shape, stride) < 0
                if ends_packet_jit(kind):  # a single
                    if bad:
                        _bump(drop_reg, m, bad_dest)
                    elif length != 1:
                        _bump(drop_reg, m, bad_length)
                    else:
                        _inject_append(buf, qhead, qcnt, m, r, flit, DI)
                        committed[m, j] = qcnt[m, r]
                    continue
                ck[m, j, _OPEN], ck[m, j, _COUNT], ck[m, j, _LENGTH] = 1, 1, length
                ck[m, j, _BAD_DEST], ck[m, j, _OVER] = bad, 0
                if not bad:
                    _inject_append(buf, qhead, qcnt, m, r, flit, DI)
                continue
            if not ck[m, j, _OPEN]:
                _bump(drop_reg, m, orphan)
                continue
            ck[m, j, _COUNT] += 1
            if not ends_packet_jit(kind):  # a body
                if ck[m, j, _COUNT] >= ck[m, j, _LENGTH]:
                    ck[m, j, _OVER] = 1
                elif not ck[m, j, _BAD_DEST]:
                    _inject_append(buf, qhead, qcnt, m, r, flit, DI)
                continue
            ck[m, j, _OPEN] = 0  # tail
            if ck[m, j, _BAD_DEST]:
                _bump(drop_reg, m, bad_dest)
            elif ck[m, j, _OVER] or ck[m, j, _COUNT] != ck[m, j, _LENGTH]:
                qcnt[m, r] = committed[m, j]
                _bump(drop_reg, m, bad_length)
            else:
                _inject_append(buf, qhead, qcnt, m, r, flit, DI)
                committed[m, j] = qcnt[m, r]


@njit(cache=True)
def _load(S, C, L, pk_first, pk_src, pk_dst, pk_seq, src_pk, created, latencies, snap):
    """A whole load study (:func:`tlm.link.measure.simulate`) on the packets and flit pieces of
    :func:`_packet_tables`. Returns (offered flits, accepted flits, latencies written)."""
    cycles, warmup, length, seq_mask = L[0], L[1], L[2], L[3]
    head, seq_off, vc_off = L[4], L[5], L[6]
    head_dst, head_src, body, tail = L[7], L[8], L[9], L[10]
    kind_off, kind_mask = C.kind_off, C.kind_mask
    N = C.here.shape[0]
    lanes = C.lanes
    made = np.zeros(N, np.int64)  # packets created per source
    sent = np.zeros(N, np.int64)  # packets fully accepted
    fi = np.zeros(N, np.int64)  # flit index within the front packet
    in_src = np.zeros(N, np.int64)  # packet being ejected at each node
    in_seq = np.zeros(N, np.int64)
    # a load study runs the RTL's router: one injection and one ejection port per node
    inj_v = np.zeros((N, 1), np.bool_)
    inj_f = np.zeros((N, 1), np.int64)
    ready = np.ones((N, 1), np.bool_)
    acc = np.zeros((N, 1), np.bool_)
    ejv = np.zeros((N, 1), np.bool_)
    ejf = np.zeros((N, 1), np.int64)
    offered = accepted = nlat = 0
    for cycle in range(cycles):
        if cycle == warmup:
            snap[:, :] = S.link_flits
        for i in range(pk_first[cycle], pk_first[cycle + 1]):
            src = pk_src[i]
            created[src, pk_seq[i]] = cycle
            made[src] += 1
            if cycle >= warmup:
                offered += length
        for n in range(N):
            if sent[n] < made[n]:
                i = src_pk[n, sent[n]]
                lane = pk_seq[i] % lanes  # packets take the lanes in turn
                if fi[n] == 0:
                    f = head | head_dst[pk_dst[i]] | head_src[n]
                    inj_f[n, 0] = f | (pk_seq[i] << seq_off) | (lane << vc_off)
                elif fi[n] == length - 1:
                    inj_f[n, 0] = tail[lane]
                else:
                    inj_f[n, 0] = body[lane]
                inj_v[n, 0] = True
            else:
                inj_v[n, 0] = False
        network_cycle(S, C, inj_v, inj_f, ready, acc, ejv, ejf)
        for n in range(N):
            if acc[n, 0]:
                fi[n] += 1
                if fi[n] == length:
                    fi[n] = 0
                    sent[n] += 1
            if ejv[n, 0]:
                f = ejf[n, 0]
                kind = (f >> kind_off) & kind_mask
                if starts_packet_jit(kind):
                    in_src[n] = field_node(f, C.src_off, C.cb, C.cmask, C.shape, C.stride)
                    in_seq[n] = (f >> seq_off) & seq_mask
                if cycle >= warmup:
                    accepted += 1
                if ends_packet_jit(kind):
                    t0 = created[in_src[n], in_seq[n]]
                    if t0 >= warmup:
                        latencies[nlat] = cycle - t0
                        nlat += 1
    return offered, accepted, nlat


# -- Python side ------------------------------------------------------------------------------
def signed(flit: int) -> int:
    """A flit of up to 64 bits as the int64 with the same bits (what the kernels hold).

    Examples
    --------
    >>> signed(5), signed((1 << 64) - 1)
    (5, -1)
    """
    return flit - (1 << 64) if flit >> 63 else flit


class CompiledNetwork:
    """All routers of ``cfg.shape`` in flat arrays, stepped by a compiled kernel: the same
    cycle, inputs and outputs as :class:`~tlm.link.network.RouterNetwork` (``interval`` and
    ``ports`` as there; injection and ejection ports named by the same ids).

    Examples
    --------
    >>> from tlm.link.network import RouterNetwork
    >>> cfg = LinkConfig((4, 4))
    >>> fast, ref = CompiledNetwork(cfg), RouterNetwork(cfg)
    >>> flit = cfg.fmt.head(dst=(2, 3), src=(0, 0), length=1, seq=5)
    >>> offers = [{0: flit}] + [{}] * 13
    >>> steps = [(fast.step(x).ejected, ref.step(x).ejected) for x in offers]
    >>> steps[12][0] == {14: flit}, all(a == b for a, b in steps)   # 3 hops: 3*3+3 cycles
    (True, True)
    """

    def __init__(self, cfg: LinkConfig, interval=None, ports: str = "single"):
        self.consts = make_consts(cfg, interval, ports)
        self.cfg = cfg
        self.ports = Ports(cfg, ports)
        self.state = make_state(cfg, ports)
        shape = (cfg.torus.nodes, self.ports.count)
        self._inj_v = np.zeros(shape, np.bool_)
        self._inj_f = np.zeros(shape, np.int64)
        self._ready = np.ones(shape, np.bool_)
        self._acc = np.zeros(shape, np.bool_)
        self._ejv = np.zeros(shape, np.bool_)
        self._ejf = np.zeros(shape, np.int64)
        self.cycle = 0

    @property
    def port_count(self) -> int:
        """As :attr:`RouterNetwork.port_count <tlm.link.network.RouterNetwork.port_count>`."""
        return self.ports.count

    def injection_port(self, src: int, dst: int) -> int:
        """As :meth:`RouterNetwork.injection_port
        <tlm.link.network.RouterNetwork.injection_port>`."""
        return injection_port_id(self.ports, src, dst)

    def inject_ready(self, port: int) -> bool:
        """Injection port id ``port`` has room (under ``"single"``: node ``port``'s)."""
        node, i = divmod(port, self.ports.count)
        r = self.ports.inject_requester[i]
        return bool(self.state.qcnt[node, r] < self.cfg.inject_depth)

    @property
    def idle(self) -> bool:
        """As :attr:`RouterNetwork.idle <tlm.link.network.RouterNetwork.idle>`: nothing buffered, no
        register holding anything, no link waiting out its interval."""
        return bool(idle(self.state))

    def step(self, inject=None, eject_ready=None) -> NetStep:
        """Advance one cycle; arguments and result as :meth:`RouterNetwork.step
        <tlm.link.network.RouterNetwork.step>`."""
        self._inj_v[:] = False
        self._ready[:] = True
        inj_v, inj_f = self._inj_v.reshape(-1), self._inj_f.reshape(-1)
        ready = self._ready.reshape(-1)
        for port, flit in (inject or {}).items():
            inj_v[port], inj_f[port] = True, signed(flit)
        for port, ok in (eject_ready or {}).items():
            ready[port] = bool(ok)
        network_cycle(
            self.state,
            self.consts,
            self._inj_v,
            self._inj_f,
            self._ready,
            self._acc,
            self._ejv,
            self._ejf,
        )
        self.cycle += 1
        out = NetStep()
        ejf = self._ejf.reshape(-1)
        out.accepted = np.flatnonzero(self._acc).tolist()
        out.ejected = {int(i): int(ejf[i]) & _MASK64 for i in np.flatnonzero(self._ejv)}
        return out

    # -- registers, in Router's terms ------------------------------------------------------
    def link_reg(self, node: int) -> tuple:
        """Flits in ``node``'s link output registers, by port (``None``: nothing)."""
        s = self.state
        return tuple(
            int(s.lreg[node, p]) & _MASK64 if s.lval[node, p] and p != LOCAL else None
            for p in range(self.cfg.ports)
        )

    def credit_reg(self, node: int) -> tuple:
        return tuple(int(x) for x in self.state.creg[node])

    def eject_reg(self, port: int):
        """The flit in ejection port id ``port``'s register (under ``"single"``: node
        ``port``'s), or ``None``."""
        node, e = divmod(port, self.ports.count)
        s = self.state
        return int(s.ejreg[node, e]) & _MASK64 if s.ejval[node, e] else None

    def counters(self, node: int) -> list:
        return [int(x) for x in self.state.counters[node]]


def _packet_tables(sources):
    """A load study's packets as the kernel reads them: the kept packets (the pattern sent
    them) with their creation cycle, source, destination and sequence number; each source's
    packets in order; and the pieces of their flits, made by the flit encoder."""
    cfg, fmt, torus = sources.cfg, sources.fmt, sources.torus
    n, cycles, length = torus.nodes, sources.cycles, sources.length
    keep = sources.packet_dst >= 0
    cyc = sources.packet_cycle[keep].astype(np.int64)
    src = sources.packet_src[keep].astype(np.int64)
    dst = sources.packet_dst[keep].astype(np.int64)
    order = np.argsort(src, kind="stable")  # each source's packets in creation order
    per_src = np.bincount(src, minlength=n)
    ordinal = np.empty(src.size, np.int64)
    ordinal[order] = np.arange(src.size) - np.repeat(np.cumsum(per_src) - per_src, per_src)
    most = int(per_src.max()) if src.size else 0
    src_pk = np.zeros((n, max(most, 1)), np.int64)
    src_pk[src, ordinal] = np.arange(src.size)
    seq = ordinal & sources.seq_mask
    first = np.searchsorted(cyc, np.arange(cycles + 1)).astype(np.int64)
    created = np.zeros((n, max(min(most, sources.seq_mask + 1), 1)), np.int64)
    # flit pieces: a head is the OR of its kind and length, its destination, its source, its
    # sequence number and lane at their fields; body and tail flits carry data 0
    zero = (0,) * torus.dims
    base = fmt.head(zero, zero, length, 0)
    coords = torus.coords()
    as_array = lambda values: np.array([signed(v) for v in values], np.int64)  # noqa: E731
    head_dst = as_array(fmt.head(c, zero, length, 0) ^ base for c in coords)
    head_src = as_array(fmt.head(zero, c, length, 0) ^ base for c in coords)
    lanes = range(cfg.lanes)
    body = as_array(fmt.body(0, vc=lane) for lane in lanes)
    tail = as_array(fmt.body(0, vc=lane, tail=True) for lane in lanes)
    L = (
        cycles,
        sources.warmup,
        length,
        sources.seq_mask,
        signed(base),
        fmt.offset("seq"),
        fmt.offset("vc"),
        head_dst,
        head_src,
        body,
        tail,
    )
    return L, first, src, dst, seq, src_pk, created, src.size


def run_load(sources) -> dict:
    """Run ``sources`` (a fresh :class:`~tlm.link.sources.LoadSources`) for all its cycles on
    a compiled network; the figures of :func:`tlm.link.measure.simulate`, to the last bit."""
    cfg = sources.cfg
    C = make_consts(cfg)
    S = make_state(cfg)
    L, first, src, dst, seq, src_pk, created, count = _packet_tables(sources)
    latencies = np.zeros(max(count, 1), np.int64)
    snap = np.zeros_like(S.link_flits)
    offered, accepted, nlat = _load(S, C, L, first, src, dst, seq, src_pk, created, latencies, snap)
    sources.offered, sources.accepted_flits = int(offered), int(accepted)
    sources.latencies = latencies[:nlat].tolist()
    sources.cycle = sources.cycles
    return sources.result((S.link_flits - snap).tolist())
