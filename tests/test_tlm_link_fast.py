"""tlm.link.fast: the compiled network equals tlm.link.network register for register, and a
compiled load study gives the figures of the Python one to the last bit.

The kernels compile once per environment (about 10 s, then cached on disk by numba)."""

import json

import numpy as np
import pytest

from tlm.cli import main
from tlm.link.config import DropKind, LinkConfig
from tlm.link.fast import FastNetwork
from tlm.link.load import simulate
from tlm.link.network import Network
from tlm.link.traffic import PATTERNS
from verif.link.scoreboard import PacketBoard
from verif.link.stimulus import TWIN_CASES, Packet, random_packets
from verif.link.traffic import NodeTraffic


@pytest.mark.parametrize("shape,vcs,depth,inject,eject", TWIN_CASES)
def test_fast_equals_network(shape, vcs, depth, inject, eject, seed):
    cfg = LinkConfig(shape, vcs=vcs, depth=depth)
    rng = np.random.default_rng(seed)
    packets = random_packets(cfg, rng, 25, malformed=0.15)
    for src, mine in enumerate(packets):  # and packets cut short by the next (good) head
        good = [i for i, p in enumerate(mine) if p.bad is None]
        for i in sorted(rng.choice(good, size=min(2, len(good)), replace=False), reverse=True):
            mine.insert(int(i), _cut_short(cfg, rng, src))
    traffic = NodeTraffic(packets, PacketBoard(cfg), inject, eject, rng)
    net, fast = Network(cfg), FastNetwork(cfg)
    for cycle in range(3000):
        if rng.random() < 0.05:
            _link_fault(cfg, rng, net, fast)
        offer, ready = traffic.offers()
        want = net.step(offer, ready)
        got = fast.step(offer, ready)
        assert got.accepted == sorted(want.accepted), cycle
        assert got.ejected == want.ejected, cycle
        for i in want.accepted:
            traffic.accepted(i)
        for node, flit in want.ejected.items():
            traffic.board.eject(node, flit, cycle)
        for node, r in enumerate(net.routers):
            where = (cycle, node)
            assert fast.link_reg(node) == tuple(r.link_reg), where
            assert fast.credit_reg(node) == tuple(r.credit_reg), where
            assert fast.eject_reg(node) == r.eject_reg, where
            assert fast.counters(node) == r.counters, where
            assert fast.inject_ready(node) == r.inject_ready, where
            assert fast.state.cred[node].tolist() == r.credits, where
            assert fast.state.rr[node].tolist() == r.rr, where
        if cycle > 50 and not traffic.pending and all(r.quiet for r in net.routers):
            break
    assert cycle < 2999
    traffic.board.check_done()
    assert fast.state.link_flits.tolist() == net.link_flits
    assert all(np.sum([r.counters for r in net.routers], axis=0))  # every kind was dropped


def _cut_short(cfg, rng, src) -> Packet:
    """The head and first body flit of a 3-flit packet (the next head finds it open)."""
    fmt, torus = cfg.fmt, cfg.torus
    dst = torus.coord(int(rng.integers(torus.nodes)))
    flits = fmt.packet(dst, torus.coord(src), 3, 0, [7, 8])[:2]
    return Packet(src, None, 0, 0, flits, DropKind.BAD_LENGTH)


def _link_fault(cfg, rng, net, fast):
    """A broken neighbour: an orphan body or tail, or a head for outside the torus, on a
    random link into an idle VC, in both models (its sender's credit taken as if it sent it)."""
    fmt, torus = cfg.fmt, cfg.torus
    node, port = int(rng.integers(torus.nodes)), int(rng.integers(1, cfg.ports))
    vc = int(rng.integers(cfg.vcs))
    peer, facing = int(fast.consts.peer_node[node, port]), int(fast.consts.peer_port[port])
    r = 1 + (port - 1) * cfg.vcs + vc
    upstream, here = net.routers[peer], net.routers[node]
    if upstream.link_reg[facing] is not None or upstream.credits[facing][vc] == 0:
        return
    if here.fifo[r] or here.alloc[r] is not None:
        return
    if rng.random() < 0.5:
        flit = fmt.body(int(rng.integers(1 << 20)), vc=vc, tail=bool(rng.integers(2)))
    else:
        dst = list(torus.coord(int(rng.integers(torus.nodes))))
        dst[0] = cfg.shape[0]
        flit = fmt.head(tuple(dst), torus.coord(peer), 2, 0, vc=vc)
    if net._link_in[node] is None:
        net._link_in[node] = [None] * cfg.ports
    net._link_in[node][port] = flit
    upstream.credits[facing][vc] -= 1
    fast.state.lval[peer, facing], fast.state.lreg[peer, facing] = True, flit
    fast.state.cred[peer, facing, vc] -= 1


def test_flit_without_credit_is_an_error():
    cfg = LinkConfig((4, 4))
    fast = FastNetwork(cfg)
    node, port = 5, 1  # node 5 is (1, 1); its x+ input VC 0 is requester 1
    fast.state.qcnt[node, 1] = cfg.depth  # full, and its packet waits for a y+ credit
    fast.state.alloc_port[node, 1] = 3
    fast.state.cred[node, 3] = 0
    peer, peer_port = fast.consts.peer_node[node, port], fast.consts.peer_port[port]
    fast.state.lval[peer, peer_port] = True
    fast.state.lreg[peer, peer_port] = cfg.fmt.head((0, 0), (2, 1), 1, 0)
    with pytest.raises(RuntimeError) as error:
        fast.step()
    assert str(error.value) == "router (1, 1) port 1: flit arrived without a credit"


def test_bad_arguments():
    with pytest.raises(ValueError) as error:
        FastNetwork(LinkConfig((4, 4), width=96))
    assert str(error.value) == "width must be at most 64 bits for the compiled engine, not 96"
    with pytest.raises(TypeError) as error:
        FastNetwork((4, 4))
    assert str(error.value) == "cfg must be a LinkConfig, not (4, 4)"
    with pytest.raises(ValueError) as error:
        simulate(LinkConfig((4, 4)), cycles=10, engine="numba")
    assert str(error.value) == "engine must be one of fast, python, not 'numba'"


def _check_engines_agree(cfg, pattern, rate, cycles, seed, **kwargs):
    fast = simulate(cfg, pattern, rate, cycles, seed=seed, **kwargs)
    python = simulate(cfg, pattern, rate, cycles, seed=seed, engine="python", **kwargs)
    assert fast == python
    assert fast["packets"] > 0


@pytest.mark.parametrize("pattern", PATTERNS)
@pytest.mark.parametrize("shape,rate,cycles", [((4, 4), 0.4, 1500), ((4, 4, 4), 0.3, 400)])
def test_simulate_engines_agree(pattern, shape, rate, cycles, seed):
    _check_engines_agree(LinkConfig(shape), pattern, rate, cycles, seed)


@pytest.mark.parametrize(
    "shape,vcs,depth,pattern,rate,length,warmup",
    [
        ((4, 4), 2, 4, "uniform", 1.0, 4, None),  # above saturation: source queues grow
        ((4, 4), 4, 2, "hotspot", 0.5, 1, 100),
        ((3, 5), 4, 1, "neighbour", 0.6, 3, 0),
    ],
)
def test_simulate_engines_agree_configs(shape, vcs, depth, pattern, rate, length, warmup, seed):
    cfg = LinkConfig(shape, vcs=vcs, depth=depth)
    _check_engines_agree(cfg, pattern, rate, 1000, seed, length=length, warmup=warmup)


def test_cli_engines(capsys):
    args = ["noc", "--shape", "4x4", "--rate", "0.3", "--cycles", "600", "--json"]
    assert main(args) == 0
    fast = capsys.readouterr().out
    assert main([*args, "--engine", "python"]) == 0
    assert capsys.readouterr().out == fast
    # a sweep on the compiled engine: every point as its own run
    assert main(["noc", "--shape", "4x4", "--rate", "0.1,0.3", "--cycles", "600", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows[1] == json.loads(fast)[0]
    # the reference engines sweep on the batch model: the same load, other draws
    args = ["noc", "--shape", "4x4", "--rate", "0.1,0.3", "--cycles", "600", "--json"]
    assert main([*args, "--engine", "python"]) == 0
    batch = json.loads(capsys.readouterr().out)
    assert batch[1] != rows[1] and batch[1]["accepted"] == pytest.approx(0.3, abs=0.03)


def test_cli_bad_engine(capsys):
    assert main(["noc", "--engine", "numba"]) == 2
    assert capsys.readouterr().err.strip() == (
        "trnsim noc: error: engine must be one of fast, python, not 'numba'"
    )
