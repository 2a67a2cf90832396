"""The network model vectorised with numpy: a batch of independent networks stepped at once.

:class:`BatchNetwork` holds ``batch`` copies of the same torus (each with its own traffic) and
advances all their routers by one cycle with a fixed number of array operations, instead of a
Python loop over routers and flits. It computes exactly what :class:`~tlm.link.network.Network`
does (``tests/test_tlm_link_batch.py`` steps both side by side and compares every register);
the rules are documented there and in :mod:`tlm.link.router`. Flits must fit 64 bits.
"""

from __future__ import annotations

import numpy as np

from .config import DropKind, LinkConfig

__all__ = ["BatchNetwork"]

U64 = np.uint64


class BatchNetwork:
    """``batch`` networks of ``cfg.shape``; see the module docstring.

    State arrays are indexed by router ``m = b * nodes + node``.

    Examples
    --------
    >>> cfg = LinkConfig((4, 4))
    >>> net = BatchNetwork(cfg, batch=2)
    >>> flit = cfg.fmt.head(dst=(2, 3), src=(0, 0), length=1, seq=5)
    >>> valid = np.zeros((2, 16), bool); valid[1, 0] = True
    >>> flits = np.zeros((2, 16), np.uint64); flits[1, 0] = flit
    >>> for c in range(9):
    ...     acc, ej_valid, ej_flit = net.step(valid if c == 0 else None, flits)
    >>> np.argwhere(ej_valid).tolist(), bool(ej_flit[1, 14] == flit)   # 3 hops: 2*3+2
    ([[1, 14]], True)
    """

    def __init__(self, cfg: LinkConfig, batch: int = 1):
        if not isinstance(cfg, LinkConfig):
            raise TypeError(f"cfg must be a LinkConfig, not {cfg!r}")
        if cfg.width > 64:
            raise ValueError(f"width must be at most 64 bits for the batch model, not {cfg.width}")
        if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
            raise ValueError(f"batch must be a positive integer, not {batch!r}")
        self.cfg, self.batch = cfg, batch
        fmt, torus = cfg.fmt, cfg.torus
        N, P, V, R = torus.nodes, cfg.ports, cfg.vcs, cfg.requesters
        M = batch * N
        self.N, self.P, self.V, self.R, self.M = N, P, V, R, M
        self.D, self.DI = cfg.depth, cfg.inject_depth
        self.Dm = max(self.D, self.DI)
        self.buf = np.zeros((M, R, self.Dm), U64)
        self.head = np.zeros((M, R), np.int64)
        self.cnt = np.zeros((M, R), np.int64)  # r = 0: written flits, committed or pending
        self.cm = np.zeros(M, np.int64)  # committed flits of the injection buffer
        self.held = np.zeros((M, R), bool)
        self.aport = np.zeros((M, R), np.int64)
        self.avc = np.zeros((M, R), np.int64)
        self.busy = np.zeros((M, P, V), bool)
        self.cred = np.full((M, P, V), cfg.depth, np.int64)
        self.lreg = np.zeros((M, P), U64)
        self.lval = np.zeros((M, P), bool)
        self.creg = np.zeros((M, P), np.int64)
        self.ejreg = np.zeros(M, U64)
        self.ejval = np.zeros(M, bool)
        self.rr = np.zeros((M, P), np.int64)
        self.counters = np.zeros((M, len(DropKind)), np.int64)
        self.open = np.zeros(M, bool)
        self.count = np.zeros(M, np.int64)
        self.length = np.zeros(M, np.int64)
        self.bdest = np.zeros(M, bool)
        self.over = np.zeros(M, bool)
        self.link_flits = np.zeros((M, P), np.int64)
        self.cycle = 0
        # constants
        coords = np.array(torus.coords(), np.int64)  # [N, dims]
        self.here = np.tile(coords, (batch, 1))  # [M, dims]
        self.k = np.array(cfg.shape, np.int64)
        peer_node = np.zeros((N, P), np.int64)
        peer_port = np.zeros(P, np.int64)
        for node, port, peer, pport in torus.links():
            peer_node[node, port] = peer
            peer_port[port] = pport
        base = (np.arange(M) // N * N)[:, None]
        self.peer_m = base + np.tile(peer_node, (batch, 1))  # [M, P]
        self.peer_p = peer_port
        flat = self.peer_m * P + peer_port[None, :]
        flat[:, 0] = np.arange(M) * P  # port 0 of the router itself: never set
        self.peer_flat = flat
        self.pay_shift = 2 + fmt.vc_bits
        self.cb = fmt.coord_bits
        self.cfield = fmt.dims * fmt.coord_bits
        self.len_shift = self.pay_shift + 2 * self.cfield
        self.len_mask = (1 << fmt.len_bits) - 1
        self.vc_mask = (1 << fmt.vc_bits) - 1
        self.lanes = cfg.lanes
        self.rq_port = np.array([0] + [1 + (r - 1) // V for r in range(1, R)])
        self.rq_vc = np.array([0] + [(r - 1) % V for r in range(1, R)])
        self.rq_depth = np.array([self.DI] + [self.D] * (R - 1))
        self.top = (1 << cfg.counter_bits) - 1
        self.vc_range = np.arange(V)
        self._m = np.arange(M)

    def _coords(self, field):
        """Coordinates [..., dims] of packed coordinate fields."""
        shifts = np.arange(self.cfg.fmt.dims, dtype=np.uint64) * U64(self.cb)
        return ((field[..., None] >> shifts) & U64((1 << self.cb) - 1)).astype(np.int64)

    def _route(self, heads, rm):
        """Output port, dateline class and bad-destination flag of flits at routers ``rm``."""
        pay = heads >> U64(self.pay_shift)
        mask = U64((1 << self.cfield) - 1)
        dst = self._coords(pay & mask)
        src = self._coords((pay >> U64(self.cfield)) & mask)
        bad = (dst >= self.k).any(axis=-1)
        port = np.zeros(heads.shape, np.int64)
        cls = np.zeros(heads.shape, np.int64)
        found = np.zeros(heads.shape, bool)
        for d, k in enumerate(self.cfg.shape):
            c = self.here[rm, d]
            t, s = dst[..., d], src[..., d]
            step = (t != c) & ~found
            plus = (t - c) % k <= k // 2
            cl = np.where(plus, (c == k - 1) | (c < s), (c == 0) | (c > s))
            port = np.where(step, np.where(plus, 1 + 2 * d, 2 + 2 * d), port)
            cls = np.where(step, cl, cls)
            found |= step
        return port, cls, bad

    def step(self, inject_valid=None, inject_flit=None, eject_ready=None):
        """Advance every network one cycle.

        Parameters
        ----------
        inject_valid : bool array [batch, nodes] or None (nothing offered)
        inject_flit : uint64 array [batch, nodes]
        eject_ready : bool array [batch, nodes] or None (all ready)

        Returns
        -------
        accepted, eject_valid : bool arrays [batch, nodes]
        eject_flit : uint64 array [batch, nodes]
        """
        M, P, V, R = self.M, self.P, self.V, self.R
        shape = (self.batch, self.N)
        inj_v = np.zeros(M, bool) if inject_valid is None else inject_valid.reshape(M)
        inj_f = np.zeros(M, U64) if inject_flit is None else inject_flit.reshape(M)
        ready = np.ones(M, bool) if eject_ready is None else eject_ready.reshape(M)
        # what the neighbours' registers show this cycle
        flat = self.peer_flat  # port 0 points at a register that is always empty
        cin = self.creg.reshape(-1).take(flat).reshape(M, P)
        lin_v = self.lval.reshape(-1).take(flat).reshape(M, P)
        lin_f = self.lreg.reshape(-1).take(flat).reshape(M, P)
        ej_out_v = self.ejval & ready
        ej_out_f = self.ejreg.copy()
        ej_free = ~self.ejval | ready
        inject_ready = self.cnt[:, 0] < self.DI
        # requests, on the non-empty FIFOs only
        nonempty = self.cnt > 0
        nonempty[:, 0] = self.cm > 0
        qf = np.flatnonzero(nonempty)  # flat index m * R + r of each non-empty FIFO
        qm, qr = qf // R, qf % R
        qhead = self.head.reshape(-1).take(qf)
        heads = self.buf.reshape(-1).take(qf * self.Dm + qhead)
        kind = (heads & U64(3)).astype(np.int64)
        is_head = (kind == 0) | (kind == 3)
        held = self.held.reshape(-1).take(qf)
        port = np.zeros(heads.size, np.int64)
        cls = np.zeros(heads.size, np.int64)
        bad = np.zeros(heads.size, bool)
        fresh = ~held
        port[fresh], cls[fresh], bad[fresh] = self._route(heads[fresh], qm[fresh])
        lane = ((heads >> U64(2)) & U64(self.lanes - 1)).astype(np.int64)
        new_ov = np.where(port == 0, lane, lane + cls * self.lanes)
        rport = np.where(held, self.aport.reshape(-1).take(qf), port)
        rov = np.where(held, self.avc.reshape(-1).take(qf), new_ov)
        ovf = (qm * P + rport) * V + rov  # flat index of the output VC asked for
        busy_at = self.busy.reshape(-1).take(ovf)
        ok_link = (self.cred.reshape(-1).take(ovf) > 0) & (held | ~busy_at)
        ok_ej = ej_free.take(qm) & (held | ~self.busy.reshape(-1).take(qm * P * V))
        ok = np.where(rport == 0, ok_ej, ok_link)
        start = ~held & (qr > 0)
        drop_orphan = start & ~is_head
        drop_dest = start & is_head & bad
        want = ok & (held | (is_head & ~bad))
        # one round-robin arbiter per output: the asking requester nearest after the pointer
        wi = np.nonzero(want)[0]
        group = qm[wi] * P + rport[wi]
        key = (qr[wi] - self.rr.reshape(-1)[group]) % R
        order = np.argsort(group * R + key, kind="stable")
        sg = group[order]
        first = np.ones(sg.size, bool)
        first[1:] = sg[1:] != sg[:-1]
        g = wi[order[first]]  # index into the non-empty list of each winner
        gm, go, gw = qm[g], rport[g], qr[g]
        gq = qf[g]
        gflit = heads[g]
        gov = rov[g]
        gkind = kind[g]
        out = (gflit & ~U64(self.vc_mask << 2)) | (gov.astype(U64) << U64(2))
        gport = gm * P + go
        self.rr.reshape(-1)[gport] = (gw + 1) % R
        # ejection and link registers
        new_ejval = self.ejval & ~ready
        new_ejreg = self.ejreg.copy()
        e = go == 0
        new_ejval[gm[e]] = True
        new_ejreg[gm[e]] = out[e]
        self.ejval, self.ejreg = new_ejval, new_ejreg
        lk = ~e
        gl = gport[lk]
        self.lval = np.zeros((M, P), bool)
        self.lval.reshape(-1)[gl] = True
        self.lreg.reshape(-1)[gl] = out[lk]
        self.cred.reshape(-1)[gl * V + gov[lk]] -= 1
        self.link_flits.reshape(-1)[gl] += 1
        hold = gport * V + np.where(e, 0, gov)
        h = gkind == 0
        t = gkind == 2
        self.held.reshape(-1)[gq[h]] = True
        self.aport.reshape(-1)[gq[h]] = go[h]
        self.avc.reshape(-1)[gq[h]] = gov[h]
        self.busy.reshape(-1)[hold[h]] = True
        self.held.reshape(-1)[gq[t]] = False
        self.busy.reshape(-1)[hold[t]] = False
        # pops: grants and drops; credits back upstream
        drops = drop_orphan | drop_dest
        pf = np.concatenate([qf[drops], gq])
        pr = pf % R
        head = self.head.reshape(-1)
        head[pf] = (head[pf] + 1) % self.rq_depth[pr]
        self.cnt.reshape(-1)[pf] -= 1
        inj = pr == 0
        self.cm[pf[inj] // R] -= 1
        creg = np.zeros(M * P, np.int64)
        lk = ~inj
        # several VCs of one port may pop at once: add their (distinct) bits
        np.add.at(creg, pf[lk] // R * P + self.rq_port[pr[lk]], 1 << self.rq_vc[pr[lk]])
        self.creg = creg.reshape(M, P)
        inc = np.zeros((M, len(DropKind)), np.int64)
        # returned credits; one for a VC that holds every credit is ignored and counted
        ret = (cin[:, :, None] >> self.vc_range) & 1
        spare = ret.astype(bool) & (self.cred >= self.D)
        inc[:, DropKind.CREDIT_OVERFLOW] += spare.sum(axis=(1, 2))
        self.cred += ret & ~spare
        # link inputs
        li = np.flatnonzero(lin_v)
        if li.size:
            f = lin_f.reshape(-1).take(li)
            am, ap = li // P, li % P
            rf = am * R + 1 + (ap - 1) * V + ((f >> U64(2)) & U64(self.vc_mask)).astype(np.int64)
            cnt = self.cnt.reshape(-1)
            full = cnt[rf] >= self.D  # after this cycle's reads: sent without a credit
            if full.any():
                np.add.at(inc[:, DropKind.NO_CREDIT], am[full], 1)
                # the last flit of a full FIFO, if a head or body, closes its packet
                last = rf[full] * self.Dm + (head[rf[full]] + self.D - 1) % self.D
                lf = self.buf.reshape(-1)[last]
                self.buf.reshape(-1)[last] = np.where(lf & U64(2), lf, lf ^ U64(3))
                f, rf = f[~full], rf[~full]
            pos = (head[rf] + cnt[rf]) % self.D
            self.buf.reshape(-1)[rf * self.Dm + pos] = f
            cnt[rf] += 1
        # injection checker
        np.add.at(inc[:, DropKind.ORPHAN], qm[drop_orphan], 1)
        np.add.at(inc[:, DropKind.BAD_DEST], qm[drop_dest], 1)
        self._inject(inj_v & inject_ready, inj_f, inc)
        self.counters = np.minimum(self.counters + inc, self.top)
        self.cycle += 1
        acc = inj_v & inject_ready
        return acc.reshape(shape), ej_out_v.reshape(shape), ej_out_f.reshape(shape)

    def _inject(self, acc, f, inc):
        """The injection checker (:meth:`tlm.link.router.Router._inject_write`) on the routers
        that accepted a flit this cycle."""
        idx = np.nonzero(acc)[0]
        if not idx.size:
            return
        f = f[idx]
        kind = (f & U64(3)).astype(np.int64)
        length = ((f >> U64(self.len_shift)) & U64(self.len_mask)).astype(np.int64) + 1
        pay = f >> U64(self.pay_shift)
        bad = (self._coords(pay & U64((1 << self.cfield) - 1)) >= self.k).any(axis=-1)
        is_open, count = self.open[idx], self.count[idx]
        plen, bdest, over = self.length[idx], self.bdest[idx], self.over[idx]
        cnt0, cm, head0 = self.cnt[idx, 0], self.cm[idx], self.head[idx, 0]
        n_len = np.zeros(idx.size, np.int64)
        n_dest = np.zeros(idx.size, np.int64)
        n_orphan = np.zeros(idx.size, np.int64)

        def write(sel):
            pos = (head0[sel] + cnt0[sel]) % self.DI
            self.buf[idx[sel], 0, pos] = f[sel]
            cnt0[sel] += 1

        rb = ((kind == 0) | (kind == 3)) & is_open  # a head before the tail: roll back
        n_len += rb
        cnt0[rb] = cm[rb]
        is_open[rb] = False
        single = kind == 3
        n_dest += single & bad
        n_len += single & ~bad & (length != 1)
        s_ok = single & ~bad & (length == 1)
        write(s_ok)
        cm[s_ok] = cnt0[s_ok]
        head = kind == 0
        is_open[head] = True
        count[head] = 1
        plen[head] = length[head]
        bdest[head] = bad[head]
        over[head] = False
        write(head & ~bad)
        body = kind == 1
        n_orphan += body & ~is_open
        b = body & is_open
        count += b
        b_over = b & (count >= plen)
        over |= b_over
        write(b & ~b_over & ~bdest)
        tail = kind == 2
        n_orphan += tail & ~is_open
        t = tail & is_open
        count += t
        is_open[t] = False
        n_dest += t & bdest
        t_len = t & ~bdest & (over | (count != plen))
        n_len += t_len
        cnt0[t_len] = cm[t_len]
        t_ok = t & ~bdest & ~t_len
        write(t_ok)
        cm[t_ok] = cnt0[t_ok]
        self.open[idx], self.count[idx], self.length[idx] = is_open, count, plen
        self.bdest[idx], self.over[idx] = bdest, over
        self.cnt[idx, 0], self.cm[idx] = cnt0, cm
        inc[idx, DropKind.BAD_LENGTH] += n_len
        inc[idx, DropKind.BAD_DEST] += n_dest
        inc[idx, DropKind.ORPHAN] += n_orphan
