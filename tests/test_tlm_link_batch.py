"""tlm.link.batch: the vectorised model equals tlm.link.network register for register."""

import numpy as np
import pytest

from tlm.link.batch import BatchNetwork
from tlm.link.batch_load import simulate_batch
from tlm.link.config import DropKind, LinkConfig
from tlm.link.load import simulate
from tlm.link.network import Network
from verif.link.scoreboard import PacketBoard
from verif.link.stimulus import TWIN_CASES, credit_faults, random_packets
from verif.link.traffic import NodeTraffic


@pytest.mark.parametrize("shape,vcs,depth,inject,eject", TWIN_CASES)
def test_batch_equals_network(shape, vcs, depth, inject, eject, seed):
    check_batch(LinkConfig(shape, vcs=vcs, depth=depth), inject, eject, seed)


def test_batch_equals_network_under_link_misuse(seed):
    """Routers that believe they hold two credits more than they do (broken senders): their
    neighbours see flits without credit, they see credits they are not owed; both models drop
    and count alike, and the networks still drain."""
    cfg = LinkConfig((4, 4), vcs=2, depth=2)
    counters = check_batch(cfg, "always", "random", seed, misuse=True)
    assert counters[:, DropKind.NO_CREDIT].sum() > 0
    assert counters[:, DropKind.CREDIT_OVERFLOW].sum() > 0


def check_batch(cfg, inject, eject, seed, misuse=False):
    """Step ``Network`` and ``BatchNetwork`` side by side on the same traffic, comparing every
    register every cycle; with ``misuse``, some senders are broken (``credit_faults``) in both.
    Returns the batch model's counters."""
    n, batch = cfg.torus.nodes, 2
    rng = np.random.default_rng(seed)
    nets = [Network(cfg) for _ in range(batch)]
    traffics = [
        NodeTraffic(
            random_packets(cfg, rng, 25, malformed=0.15), PacketBoard(cfg), inject, eject, rng
        )
        for _ in range(batch)
    ]
    faults = credit_faults(cfg, rng) if misuse else None
    vec = BatchNetwork(cfg, batch)
    for cycle in range(3000):
        valid = np.zeros((batch, n), bool)
        flits = np.zeros((batch, n), np.uint64)
        ready = np.zeros((batch, n), bool)
        offers = []
        for b, traffic in enumerate(traffics):
            offer, rdy = traffic.offers()
            offers.append((offer, rdy))
            for i, f in offer.items():
                valid[b, i], flits[b, i] = True, f
            ready[b] = [rdy[i] for i in range(n)]
        if faults and cycle == faults.cycle:
            for b, net in enumerate(nets):
                for node, o, v in faults.sites:
                    net.routers[node].credits[o][v] += faults.extra
                    vec.cred[b * n + node, o, v] += faults.extra
        acc, ej_v, ej_f = vec.step(valid, flits, ready)
        for b, (net, traffic) in enumerate(zip(nets, traffics, strict=True)):
            step = net.step(*offers[b])
            assert sorted(step.accepted) == np.flatnonzero(acc[b]).tolist(), cycle
            assert step.ejected == {int(i): int(ej_f[b, i]) for i in np.flatnonzero(ej_v[b])}
            for i in step.accepted:
                traffic.accepted(i)
            for node, r in enumerate(net.routers):
                mi = b * n + node
                link = [int(vec.lreg[mi, p]) if vec.lval[mi, p] else None for p in range(cfg.ports)]
                assert tuple(link) == tuple(r.link_reg), (cycle, b, node)
                assert tuple(int(x) for x in vec.creg[mi]) == tuple(r.credit_reg)
                assert [int(x) for x in vec.counters[mi]] == r.counters
        if cycle > 50 and not any(t.pending for t in traffics) and not vec.lval.any():
            if not vec.cnt.any() and not vec.ejval.any():
                break
    assert cycle < 2999
    assert sum(sum(r.counters) for net in nets for r in net.routers) > 0
    return vec.counters


def test_bad_arguments():
    with pytest.raises(ValueError) as error:
        BatchNetwork(LinkConfig((4, 4), width=96))
    assert str(error.value) == "width must be at most 64 bits for the batch model, not 96"
    with pytest.raises(ValueError) as error:
        BatchNetwork(LinkConfig((4, 4)), batch=0)
    assert str(error.value) == "batch must be a positive integer, not 0"


@pytest.mark.parametrize("pattern", ["uniform", "transpose", "neighbour", "hotspot", "all-to-all"])
def test_batch_load_agrees_with_simulate(pattern):
    """Same sources in distribution: load and latency as the per-router model measures them."""
    cfg = LinkConfig((4, 4))
    rates = [0.05, 0.15, 1.0]  # below every pattern's saturation, and far above
    rows, _ = simulate_batch(cfg, pattern, rates, 3000, seed=2)
    for rate, row in zip(rates, rows, strict=True):
        ref = simulate(cfg, pattern, rate, 3000, seed=2)
        assert row["offered"] == pytest.approx(ref["offered"], abs=0.03)
        assert row["accepted"] == pytest.approx(ref["accepted"], abs=0.03)
        if rate < 0.5:
            assert row["latency_mean"] == pytest.approx(ref["latency_mean"], rel=0.08)
            assert row["zero_load_latency"] == ref["zero_load_latency"]


def test_batch_load_errors():
    cfg = LinkConfig((4, 4))
    with pytest.raises(ValueError) as error:
        simulate_batch(cfg, "random", [0.1], 10)
    assert str(error.value).startswith("pattern must be one of uniform, transpose")
    with pytest.raises(ValueError) as error:
        simulate_batch(cfg, "uniform", [1.5], 10)
    assert str(error.value) == (
        "rates must be loads in 0..1 flits per node per cycle, not array([1.5])"
    )
    with pytest.raises(ValueError) as error:
        simulate_batch(cfg, "uniform", [0.1], 10, length=9)
    assert str(error.value) == "length must be an integer in 1..4, not 9"
