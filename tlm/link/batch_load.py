"""Load studies on :class:`~tlm.link.batch.BatchNetwork`: many load points (or seeds) at once.

:func:`simulate_batch` runs one network per entry of ``rates`` in a single vectorised
simulation, with the same sources, warm-up and figures as :func:`tlm.link.load.simulate`
(Bernoulli sources of ``length``-flit packets, latency from creation to the tail leaving).
Random draws come from one generator for the whole batch, so a point is not bit-identical to
``simulate`` at the same seed, only equal in distribution (``tests/test_tlm_link_batch.py``).
"""

from __future__ import annotations

import numpy as np

from .batch import BatchNetwork
from .config import LinkConfig
from .load import zero_load_latency
from .traffic import HOTSPOT_FRACTION, PATTERNS

__all__ = ["simulate_batch"]

U64 = np.uint64


def simulate_batch(
    cfg: LinkConfig,
    pattern: str,
    rates,
    cycles: int,
    *,
    length: int = 4,
    seed: int = 0,
    warmup: int | None = None,
) -> tuple[list[dict], BatchNetwork]:
    """One network per rate in ``rates``; returns the figures of each and the network.

    Examples
    --------
    >>> rows, _ = simulate_batch(LinkConfig((4, 4)), "uniform", [0.1, 0.3], 500)
    >>> [round(r["accepted"], 1) for r in rows]
    [0.1, 0.3]
    """
    if pattern not in PATTERNS:
        raise ValueError(f"pattern must be one of {', '.join(PATTERNS)}, not {pattern!r}")
    rates = np.asarray(rates, float)
    if rates.ndim != 1 or not rates.size or ((rates < 0) | (rates > 1)).any():
        raise ValueError(f"rates must be loads in 0..1 flits per node per cycle, not {rates!r}")
    fmt, torus = cfg.fmt, cfg.torus
    if not 1 <= length <= fmt.max_length:
        raise ValueError(f"length must be an integer in 1..{fmt.max_length}, not {length!r}")
    warmup = cycles // 10 if warmup is None else warmup
    B, N = rates.size, torus.nodes
    rng = np.random.default_rng(seed)
    net = BatchNetwork(cfg, B)
    coords = np.array(torus.coords(), np.int64)
    if pattern == "transpose":
        if torus.shape != torus.shape[::-1]:
            raise ValueError(f"transpose needs a symmetric shape, not {torus.shape!r}")
        tmap = np.array([torus.node(tuple(c)[::-1]) for c in torus.coords()])
        tmap[tmap == np.arange(N)] = -1
    nbr = np.array(
        [[torus.node(torus.neighbour(c, p)) for p in range(1, cfg.ports)] for c in torus.coords()]
    )
    draws = rng.random((cycles, B, N)) < (rates / length)[None, :, None]
    Q = int(draws.sum(axis=0).max()) + 1
    if Q > 1 << fmt.seq_bits:
        raise ValueError(f"cycles make more than 2**seq_bits packets per source: {cycles!r}")
    qdst = np.zeros((B, N, Q), np.int64)
    created = np.zeros((B, N, Q), np.int64)
    made = np.zeros((B, N), np.int64)  # packets created per source (the next seq)
    sent = np.zeros((B, N), np.int64)  # packets fully injected
    fi = np.zeros((B, N), np.int64)  # flit index within the packet being injected
    turn = np.tile(np.arange(N), (B, 1))
    cur_src = np.zeros((B, N), np.int64)
    cur_seq = np.zeros((B, N), np.int64)
    offered = np.zeros(B, np.int64)
    accepted = np.zeros(B, np.int64)
    lat_b, lat_v = [], []
    cb = fmt.coord_bits
    strides = np.array([int(np.prod(cfg.shape[:d])) for d in range(fmt.dims)])
    coord_field = (coords << (np.arange(fmt.dims) * cb)).sum(axis=1).astype(U64)  # [N]
    pay_shift = U64(2 + fmt.vc_bits)
    c = fmt.dims * cb
    src_of = np.tile(coord_field, (B, 1)) << U64(c)
    len_field = U64((length - 1) << (2 * c))
    seq_shift = U64(2 * c + fmt.len_bits)
    head_kind = U64(3 if length == 1 else 0)
    snap = None
    for cycle in range(cycles):
        if cycle == warmup:
            snap = net.link_flits.copy()
        # new packets
        bb, nn = np.nonzero(draws[cycle])
        if bb.size:
            if pattern == "uniform" or pattern == "hotspot":
                r = rng.integers(N - 1, size=bb.size)
                dst = r + (r >= nn)
                if pattern == "hotspot":
                    hot = rng.random(bb.size) < HOTSPOT_FRACTION
                    dst = np.where(hot, np.where(nn == 0, -1, 0), dst)
            elif pattern == "transpose":
                dst = tmap[nn]
            elif pattern == "neighbour":
                dst = nbr[nn, rng.integers(cfg.ports - 1, size=bb.size)]
            else:
                turn[bb, nn] = turn[bb, nn] % (N - 1) + 1
                dst = (nn + turn[bb, nn]) % N
            keep = dst >= 0
            bb, nn, dst = bb[keep], nn[keep], dst[keep]
            slot = made[bb, nn]
            qdst[bb, nn, slot] = dst
            created[bb, nn, slot] = cycle
            made[bb, nn] += 1
            if cycle >= warmup:
                np.add.at(offered, bb, length)
        # offers: the next flit of each source's front packet
        valid = sent < made
        front = np.minimum(sent, Q - 1)
        dnode = np.take_along_axis(qdst, front[..., None], axis=2)[..., 0]
        is_head = fi == 0
        lane = (sent % cfg.lanes).astype(U64) << U64(2)  # packets take the lanes in turn
        head = (
            head_kind
            | lane
            | (
                coord_field[dnode]
                | src_of
                | len_field
                | ((sent & ((1 << fmt.seq_bits) - 1)).astype(U64) << seq_shift)
            )
            << pay_shift
        )
        body = np.where(fi == length - 1, U64(2), U64(1))
        flits = np.where(is_head, head, body)
        acc, ej_v, ej_f = net.step(valid, flits)
        fi += acc
        done = fi == length
        sent += done
        fi[done] = 0
        # ejections
        eb, en = np.nonzero(ej_v)
        if eb.size:
            f = ej_f[eb, en]
            kind = (f & U64(3)).astype(np.int64)
            h = (kind == 0) | (kind == 3)
            pay = f[h] >> pay_shift
            sc = (
                (pay[:, None] >> (U64(c) + np.arange(fmt.dims, dtype=U64) * U64(cb)))
                & U64((1 << cb) - 1)
            ).astype(np.int64)
            cur_src[eb[h], en[h]] = (sc * strides).sum(axis=1)
            cur_seq[eb[h], en[h]] = ((pay >> seq_shift) & U64((1 << fmt.seq_bits) - 1)).astype(
                np.int64
            )
            if cycle >= warmup:
                np.add.at(accepted, eb, 1)
            t = kind >= 2
            tb, tn = eb[t], en[t]
            born = created[tb, cur_src[tb, tn], cur_seq[tb, tn]]
            ok = born >= warmup
            lat_b.append(tb[ok])
            lat_v.append(cycle - born[ok])
    window = cycles - warmup
    lat_b = np.concatenate(lat_b) if lat_b else np.zeros(0, np.int64)
    lat_v = np.concatenate(lat_v) if lat_v else np.zeros(0, np.int64)
    sent_links = net.link_flits - (snap if snap is not None else 0)
    rows = []
    zero = float(zero_load_latency(cfg, pattern, length))
    for b in range(B):
        lat = lat_v[lat_b == b].astype(float)
        util = sent_links[b * N : (b + 1) * N, 1:] / window
        rows.append(
            {
                "shape": torus.name,
                "traffic": pattern,
                "rate": float(rates[b]),
                "length": length,
                "cycles": cycles,
                "warmup": warmup,
                "offered": float(offered[b] / (N * window)),
                "accepted": float(accepted[b] / (N * window)),
                "packets": int(lat.size),
                "latency_mean": float(lat.mean()) if lat.size else None,
                "latency_p99": float(np.percentile(lat, 99)) if lat.size else None,
                "latency_max": int(lat.max()) if lat.size else None,
                "zero_load_latency": zero,
                "link_util_mean": float(util.mean()),
                "link_util_max": float(util.max()),
            }
        )
    return rows, net
