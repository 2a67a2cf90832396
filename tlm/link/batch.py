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
        self.buf = np.zeros((M, R, max(self.D, self.DI)), U64)
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
        self._m = np.arange(M)

    def _coords(self, field):
        """Coordinates [..., dims] of packed coordinate fields."""
        shifts = np.arange(self.cfg.fmt.dims, dtype=np.uint64) * U64(self.cb)
        return ((field[..., None] >> shifts) & U64((1 << self.cb) - 1)).astype(np.int64)

    def _route(self, heads):
        """Output port, dateline class and bad-destination flag of head flits [M, R]."""
        pay = heads >> U64(self.pay_shift)
        mask = U64((1 << self.cfield) - 1)
        dst = self._coords(pay & mask)
        src = self._coords((pay >> U64(self.cfield)) & mask)
        bad = (dst >= self.k).any(axis=-1)
        port = np.zeros(heads.shape, np.int64)
        cls = np.zeros(heads.shape, np.int64)
        found = np.zeros(heads.shape, bool)
        for d, k in enumerate(self.cfg.shape):
            c = self.here[:, d][:, None]
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
        m = self._m
        shape = (self.batch, self.N)
        inj_v = np.zeros(M, bool) if inject_valid is None else inject_valid.reshape(M)
        inj_f = np.zeros(M, U64) if inject_flit is None else inject_flit.reshape(M)
        ready = np.ones(M, bool) if eject_ready is None else eject_ready.reshape(M)
        # what the neighbours' registers show this cycle
        cin = self.creg[self.peer_m, self.peer_p[None, :]]
        lin_v = self.lval[self.peer_m, self.peer_p[None, :]]
        lin_f = self.lreg[self.peer_m, self.peer_p[None, :]]
        lin_v[:, 0] = False
        cin[:, 0] = 0
        ej_out_v = self.ejval & ready
        ej_out_f = self.ejreg.copy()
        ej_free = ~self.ejval | ready
        inject_ready = self.cnt[:, 0] < self.DI
        # requests
        nonempty = self.cnt > 0
        nonempty[:, 0] = self.cm > 0
        heads = self.buf[m[:, None], np.arange(R)[None, :], self.head]
        kind = (heads & U64(3)).astype(np.int64)
        is_head = (kind == 0) | (kind == 3)
        port, cls, bad = self._route(heads)
        lane = ((heads >> U64(2)) & U64(self.lanes - 1)).astype(np.int64)
        new_ov = np.where(port == 0, lane, lane + cls * self.lanes)
        held = self.held
        rport = np.where(held, self.aport, port)
        rov = np.where(held, self.avc, new_ov)
        busy_at = self.busy[m[:, None], rport, rov]
        cred_at = self.cred[m[:, None], rport, rov]
        ok_link = (cred_at > 0) & (held | ~busy_at)
        ok_ej = ej_free[:, None] & (held | ~self.busy[:, 0, 0][:, None])
        ok = np.where(rport == 0, ok_ej, ok_link)
        start = nonempty & ~held
        drop_orphan = start & ~is_head
        drop_dest = start & is_head & bad
        drop_orphan[:, 0] = False
        drop_dest[:, 0] = False
        want = nonempty & ok & (held | (is_head & ~bad))
        # one round-robin arbiter per output
        r_idx = np.arange(R)
        asks = want[:, None, :] & (rport[:, None, :] == np.arange(P)[None, :, None])
        key = np.where(asks, (r_idx[None, None, :] - self.rr[:, :, None]) % R, R)
        winner = key.argmin(axis=2)
        granted = key.min(axis=2) < R
        gm, go = np.nonzero(granted)
        gw = winner[gm, go]
        gflit = heads[gm, gw]
        gov = rov[gm, gw]
        gkind = kind[gm, gw]
        out = (gflit & ~U64(self.vc_mask << 2)) | (gov.astype(U64) << U64(2))
        self.rr[gm, go] = (gw + 1) % R
        # ejection and link registers
        new_ejval = self.ejval & ~ready
        new_ejreg = self.ejreg.copy()
        e = go == 0
        new_ejval[gm[e]] = True
        new_ejreg[gm[e]] = out[e]
        self.ejval, self.ejreg = new_ejval, new_ejreg
        lk = ~e
        self.lval = np.zeros((M, P), bool)
        self.lval[gm[lk], go[lk]] = True
        self.lreg[gm[lk], go[lk]] = out[lk]
        self.cred[gm[lk], go[lk], gov[lk]] -= 1
        self.link_flits[gm[lk], go[lk]] += 1
        hold = np.where(e, 0, gov)
        h = gkind == 0
        t = gkind == 2
        self.held[gm[h], gw[h]] = True
        self.aport[gm[h], gw[h]] = go[h]
        self.avc[gm[h], gw[h]] = gov[h]
        self.busy[gm[h], go[h], hold[h]] = True
        self.held[gm[t], gw[t]] = False
        self.busy[gm[t], go[t], hold[t]] = False
        # pops: grants and drops; credits back upstream
        pop = drop_orphan | drop_dest
        pop[gm, gw] = True
        self.head = np.where(pop, (self.head + 1) % self.rq_depth[None, :], self.head)
        self.cnt -= pop
        self.cm -= pop[:, 0]
        weights = 1 << np.arange(V)
        creg = np.zeros((M, P), np.int64)
        creg[:, 1:] = (pop[:, 1:].reshape(M, P - 1, V) * weights).sum(axis=2)
        self.creg = creg
        # returned credits
        for v in range(V):
            self.cred[:, :, v] += (cin >> v) & 1
        # link inputs
        am, ap = np.nonzero(lin_v)
        if am.size:
            f = lin_f[am, ap]
            r = 1 + (ap - 1) * V + ((f >> U64(2)) & U64(self.vc_mask)).astype(np.int64)
            if (self.cnt[am, r] >= self.D).any():
                raise RuntimeError("a flit arrived without a credit")
            pos = (self.head[am, r] + self.cnt[am, r]) % self.D
            self.buf[am, r, pos] = f
            self.cnt[am, r] += 1
        # injection checker
        inc = np.zeros((M, len(DropKind)), np.int64)
        inc[:, DropKind.ORPHAN] = drop_orphan.sum(axis=1)
        inc[:, DropKind.BAD_DEST] = drop_dest.sum(axis=1)
        self._inject(inj_v & inject_ready, inj_f, inc)
        self.counters = np.minimum(self.counters + inc, self.top)
        self.cycle += 1
        acc = inj_v & inject_ready
        return acc.reshape(shape), ej_out_v.reshape(shape), ej_out_f.reshape(shape)

    def _inject(self, acc, f, inc):
        kind = (f & U64(3)).astype(np.int64)
        length = ((f >> U64(self.len_shift)) & U64(self.len_mask)).astype(np.int64) + 1
        pay = f >> U64(self.pay_shift)
        bad = (self._coords(pay & U64((1 << self.cfield) - 1)) >= self.k).any(axis=-1)
        cnt0 = self.cnt[:, 0]
        cm = self.cm

        def write(sel):
            idx = np.nonzero(sel)[0]
            pos = (self.head[idx, 0] + cnt0[idx]) % self.DI
            self.buf[idx, 0, pos] = f[idx]
            cnt0[idx] += 1

        hs = acc & ((kind == 0) | (kind == 3))
        rb = hs & self.open
        inc[:, DropKind.BAD_LENGTH] += rb
        cnt0[rb] = cm[rb]
        self.open[rb] = False
        single = acc & (kind == 3)
        inc[:, DropKind.BAD_DEST] += single & bad
        inc[:, DropKind.BAD_LENGTH] += single & ~bad & (length != 1)
        s_ok = single & ~bad & (length == 1)
        write(s_ok)
        cm[s_ok] = cnt0[s_ok]
        head = acc & (kind == 0)
        self.open[head] = True
        self.count[head] = 1
        self.length[head] = length[head]
        self.bdest[head] = bad[head]
        self.over[head] = False
        write(head & ~bad)
        body = acc & (kind == 1)
        inc[:, DropKind.ORPHAN] += body & ~self.open
        b = body & self.open
        self.count += b
        b_over = b & (self.count >= self.length)
        self.over |= b_over
        write(b & ~b_over & ~self.bdest)
        tail = acc & (kind == 2)
        inc[:, DropKind.ORPHAN] += tail & ~self.open
        t = tail & self.open
        self.count += t
        self.open[t] = False
        inc[:, DropKind.BAD_DEST] += t & self.bdest
        t_len = t & ~self.bdest & (self.over | (self.count != self.length))
        inc[:, DropKind.BAD_LENGTH] += t_len
        cnt0[t_len] = cm[t_len]
        t_ok = t & ~self.bdest & ~t_len
        write(t_ok)
        cm[t_ok] = cnt0[t_ok]
        self.cnt[:, 0] = cnt0
