"""verif.link.collective, the traffic and scoreboard of the RTL all-gather bench, driven by the
TLM network alone: every algorithm delivers the values engine's result bit for bit, and the
scoreboard fails on a corrupted flit, on wrong data faithfully carried and on a lost packet."""

from __future__ import annotations

import numpy as np
import pytest

import verif.link.collective as collective
from tlm.link.config import LinkConfig
from tlm.link.network import RouterNetwork
from verif.link.collective import (
    ALGORITHMS,
    CollectiveTraffic,
    collective_schedule,
    random_inputs,
    settings_from_env,
)
from verif.link.scoreboard import ScoreboardError

CFG = LinkConfig((4, 4))


def drive(traffic, tamper=None, limit=20000):
    """Run ``traffic`` on the network model; ``tamper(step)`` may change what it ejected."""
    net = RouterNetwork(CFG)
    while not traffic.done:
        step = net.step(*traffic.offers())
        if tamper is not None:
            tamper(step)
        traffic.observe(step, net)
        assert traffic.cycle < limit, f"not done after {limit} cycles"
    traffic.check()
    return traffic


def make(algo="ring", fmt="bf16", per_rank=13, seed=0, inject="always", eject="always"):
    rng = np.random.default_rng(seed)
    inputs = random_inputs(fmt, 16, per_rank, rng)
    return CollectiveTraffic(CFG, collective_schedule(algo), inputs, inject, eject, rng)


@pytest.mark.parametrize("algo", ALGORITHMS)
@pytest.mark.parametrize(
    "fmt,per_rank,inject,eject",
    [
        ("bf16", 13, "always", "always"),  # 26-byte blocks: a full packet and a partial one
        ("fp8_e5m2", 1, "random", "1of4"),  # 1-byte blocks, KangaRing's empty sub-chunks
        ("fp32", 11, "1of2", "random"),  # 44 bytes: two full packets and one 2-byte flit
    ],
)
def test_every_algorithm_delivers_the_values_result(algo, fmt, per_rank, inject, eject, seed):
    traffic = drive(make(algo, fmt, per_rank, seed, inject, eject))
    schedule = traffic.schedule
    assert traffic.steps_done == len(schedule.steps)
    assert traffic.board.delivered == traffic.board.sent > 0
    itemsize = traffic.buffers.dtype.itemsize
    sent = sum(t.units for s in schedule.steps for t in s.transfers)  # chunks; blocks if subs 1
    if schedule.subs == 1:
        assert traffic.bytes == sent * per_rank * itemsize


def test_random_bits_cover_every_byte_and_no_nan(seed):
    x = random_inputs("bf16", 16, 64, np.random.default_rng(seed))
    assert x.shape == (16, 64) and not np.isnan(x.astype(np.float32)).any()
    assert len(np.unique(x.view(np.uint8))) > 250


def test_a_corrupted_flit_fails(seed):
    """One data bit flipped in one ejected flit: the board, which compares every flit with the
    one sent, fails at that cycle."""
    rng = np.random.default_rng(seed)
    victim = int(rng.integers(50, 150))
    seen = []

    def flip(step):
        for node, flit in step.ejected.items():
            if not CFG.fmt.kind(flit).starts_packet:  # a data flit
                seen.append(node)
                if len(seen) == victim:
                    step.ejected[node] = flit ^ 1 << CFG.fmt.offset("payload")

    with pytest.raises(ScoreboardError, match="corrupt or out of order"):
        drive(make(seed=seed), tamper=flip)


def test_wrong_bytes_carried_faithfully_fail_the_final_comparison(monkeypatch, seed):
    """A source that encodes one wrong byte: every packet arrives intact as sent, so only the
    comparison with the values engine can see it - and does, naming the element."""
    rng = np.random.default_rng(seed)
    victim = int(rng.integers(1, 200))
    calls = []
    faithful = collective.encode

    def encode(cfg, packet, data, vc=0):
        calls.append(packet)
        if len(calls) == victim:
            data = bytes([data[0] ^ 0x40]) + data[1:]
        return faithful(cfg, packet, data, vc)

    monkeypatch.setattr(collective, "encode", encode)
    with pytest.raises(ScoreboardError, match=r"elements differ from values.run; first: rank"):
        drive(make(seed=seed))


def test_a_lost_packet_trips_the_watchdog(seed):
    """The flits of the last packet vanish at its destination: nothing moves while it is
    outstanding, and the watchdog fails (naming the step) instead of waiting for ever. (An
    earlier packet lost shows sooner: the next one on its (source, destination, lane) arrives
    out of order.)"""
    victim = drive(make("rdh", seed=seed)).board.delivered  # the same run, undisturbed
    heads = []
    lost = set()

    def drop(step):
        for node, flit in list(step.ejected.items()):
            if CFG.fmt.kind(flit).starts_packet:
                heads.append(node)
                if len(heads) == victim:
                    lost.add(node)
            if node in lost:
                del step.ejected[node]
                if CFG.fmt.kind(flit).ends_packet:
                    lost.discard(node)

    with pytest.raises(ScoreboardError, match=r"no flit moved for 200 cycles .* step \d+: "):
        drive(make("rdh", seed=seed), tamper=drop)


def test_bad_input():
    with pytest.raises(ValueError, match="algo must be one of ring, kangaring, rdh, mesh, not 'x'"):
        collective_schedule("x")
    with pytest.raises(ValueError, match="per_rank must be an integer >= 1 .elements., not 0"):
        random_inputs("bf16", 16, 0, np.random.default_rng(0))
    small = LinkConfig((2, 2))
    x = random_inputs("bf16", 16, 1, np.random.default_rng(0))
    with pytest.raises(ValueError, match=r"chips must be nodes of the torus \(2, 2\) \(0..3\)"):
        CollectiveTraffic(small, collective_schedule("ring"), x)
    assert settings_from_env({}) == ("ring", "bf16", 208)
    assert settings_from_env({"COLL_ALGO": "mesh", "COLL_COUNT": "16"}) == ("mesh", "bf16", 16)
    for env, message in [
        ({"COLL_ALGO": "auto"}, "COLL_ALGO must be one of ring, kangaring, rdh, mesh, not 'auto'"),
        ({"COLL_FORMAT": "int8"}, "COLL_FORMAT must be one of .*, not 'int8'"),
        ({"COLL_COUNT": "100"}, "COLL_COUNT must be a positive multiple of 16 .*, not 100"),
        ({"COLL_COUNT": "-16"}, "COLL_COUNT must be a positive multiple of 16 .*, not '-16'"),
    ]:
        with pytest.raises(ValueError, match=message):
            settings_from_env(env)
