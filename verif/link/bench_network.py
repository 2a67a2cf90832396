"""cocotb bench of a torus network, in lockstep with :class:`tlm.link.network.RouterNetwork`.

Every node has a traffic generator (:class:`verif.link.drivers.NodeTraffic`) and a sink; each
cycle :class:`~verif.link.lockstep.Lockstep` drives every injection port and ejection
``ready``, then checks every node's ``inject.ready`` and ejection register against the model -
so each flit leaves the network at the cycle the model predicts - and the bench feeds the
ejected flits to a :class:`~verif.link.scoreboard.PacketBoard` (every packet once, intact, in
order per (source, destination, lane)). A :class:`~verif.link.scoreboard.Watchdog` fails the
test when no flit moves while packets are outstanding and reports where the model's buffers
hold flits.

Configured by environment: ``LINK_SHAPE``, ``LINK_VCS``, ``LINK_DEPTH``, ``LINK_PACKETS``
(per node), ``LINK_TRAFFIC`` (pattern), ``LINK_PATTERNS`` (``inject:eject`` pairs,
comma-separated), ``LINK_MALFORMED`` (share of broken packets), ``SEED``, ``LINK_PERF_JSON``.

A second test, ``last_cycle_drop``, sends only malformed packets, so that the run ends in the
cycle the last one is dropped: the drop counters read after the run must hold that drop too.
"""

from __future__ import annotations

import json
import os
import time

import cocotb
import numpy as np
from cocotb.clock import Clock

from tlm.link.config import MALFORMED, DropKind
from verif.coverage.db import write_run
from verif.link.drivers import NodeTraffic
from verif.link.lockstep import Lockstep
from verif.link.ports import config_from_env
from verif.link.scoreboard import PacketBoard, Watchdog
from verif.link.stimulus import malformed_packet, random_packets


async def run_traffic(lockstep, seed, pattern, inject, eject, packets, malformed, log):
    """Reset, then every node sends ``packets`` packets of ``pattern`` under the ``inject``
    and ``eject`` patterns, in lockstep with the model, until all are delivered."""
    cfg = lockstep.cfg
    await lockstep.reset(seed)
    lockstep.coverage.patterns(inject, eject)
    rng = np.random.default_rng(seed)
    board = PacketBoard(cfg)
    stim = random_packets(cfg, rng, packets, pattern=pattern, malformed=malformed)
    traffic = NodeTraffic(stim, board, inject, eject, rng)
    dog = Watchdog(200)
    start = time.perf_counter()
    while traffic.pending or board.outstanding:
        cycle = lockstep.cycle
        step = await lockstep.step(*traffic.offers())
        for i in step.accepted:
            traffic.accepted(i)
        for i, flit in step.ejected.items():
            board.eject(i, flit, cycle)
        dog.tick(lockstep.moved(step), board.outstanding, cycle, lockstep.where)
    seconds = time.perf_counter() - start
    cycle = lockstep.cycle
    board.check_done()
    counted = sum(sum(c) for c in await lockstep.counters())
    dropped = sum(p.bad is not None for mine in stim for p in mine)
    assert counted == dropped, f"{counted} drops counted, {dropped} malformed packets sent"
    log.info(
        "%s %s:%s: %d packets (%d flits) delivered, %d malformed dropped, %d cycles, "
        "%.0f cycles/s (seed %d)",
        pattern,
        inject,
        eject,
        board.delivered,
        board.flits,
        dropped,
        cycle,
        cycle / seconds,
        seed,
    )
    return cycle, seconds, board.flits


@cocotb.test()
async def traffic(dut):
    """Each pattern pair of LINK_PATTERNS with LINK_TRAFFIC from every node."""
    cfg, seed = config_from_env()
    dut._log.info("torus %s, seed %d (rerun with SEED=%d)", cfg.shape, seed, seed)
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    pattern = os.environ.get("LINK_TRAFFIC", "uniform")
    packets = int(os.environ.get("LINK_PACKETS", "10"))
    malformed = float(os.environ.get("LINK_MALFORMED", "0.05"))
    totals = [0, 0.0, 0]
    lockstep = Lockstep(dut, cfg, seed)
    for i, pair in enumerate(os.environ.get("LINK_PATTERNS", "always:always").split(",")):
        inject, eject = pair.split(":")
        done = await run_traffic(
            lockstep, seed + i, pattern, inject, eject, packets, malformed, dut._log
        )
        totals = [a + b for a, b in zip(totals, done, strict=True)]
    meta = {"bench": "torus", "test": "traffic", "config": cfg.tag, "seed": seed}
    write_run(f"torus-{cfg.tag}-traffic-{seed}", meta)
    if os.environ.get("LINK_PERF_JSON"):
        with open(os.environ["LINK_PERF_JSON"], "w") as f:
            json.dump({"cycles": totals[0], "seconds": totals[1], "flits": totals[2]}, f)


@cocotb.test()
async def last_cycle_drop(dut):
    """Every node sends one malformed packet of each kind (in a random order) back to back and
    nothing else: no packet is outstanding, so the run ends in the cycle the last flit is
    accepted and its packet dropped. Each node's counters must hold each of its drops, by kind
    (a counter read in the cycle a drop happens does not show it yet: it is a register)."""
    cfg, seed = config_from_env()
    dut._log.info("torus %s, seed %d (rerun with SEED=%d)", cfg.shape, seed, seed)
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    lockstep = Lockstep(dut, cfg, seed)
    await lockstep.reset(seed)
    rng = np.random.default_rng(seed)
    stim = [
        [malformed_packet(cfg, rng, src, MALFORMED[i]) for i in rng.permutation(len(MALFORMED))]
        for src in range(cfg.torus.nodes)
    ]
    traffic = NodeTraffic(stim, PacketBoard(cfg), "always", "always", rng)
    while traffic.pending:
        step = await lockstep.step(*traffic.offers())
        for i in step.accepted:
            traffic.accepted(i)
    counters = await lockstep.counters()
    for node, mine in enumerate(stim):
        want = [sum(p.bad == kind for p in mine) for kind in DropKind]
        assert counters[node] == want, f"node {node} counted {counters[node]}, sent {want}"
    dut._log.info("%d malformed packets dropped in %d cycles", 3 * len(stim), lockstep.cycle)
    meta = {"bench": "torus", "test": "last_cycle_drop", "config": cfg.tag, "seed": seed}
    write_run(f"torus-{cfg.tag}-last_cycle_drop-{seed}", meta)
