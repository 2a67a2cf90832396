"""cocotb bench of a torus network, in lockstep with :class:`tlm.link.network.Network`.

Every node has a traffic generator (:class:`verif.link.drivers.NodeTraffic`) and a sink; each
cycle the bench drives every injection port and ejection ``ready``, then checks every node's
``inject.ready`` and ejection register against the model - so each flit leaves the network at
the cycle the model predicts - and feeds the ejected flits to a
:class:`~verif.link.scoreboard.PacketBoard` (every packet once, intact, in order per (source,
destination, lane)). A :class:`~verif.link.scoreboard.Watchdog` fails the test when no flit
moves while packets are outstanding and reports where the model's buffers hold flits.

Configured by environment: ``LINK_SHAPE``, ``LINK_VCS``, ``LINK_DEPTH``, ``LINK_PACKETS``
(per node), ``LINK_TRAFFIC`` (pattern), ``LINK_PATTERNS`` (``inject:eject`` pairs,
comma-separated), ``LINK_MALFORMED`` (share of broken packets), ``SEED``, ``LINK_PERF_JSON``.
"""

from __future__ import annotations

import json
import os
import time

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ReadOnly, RisingEdge

from tlm.link.config import DropKind
from tlm.link.network import Network
from verif.link.drivers import NodeTraffic
from verif.link.ports import NodePorts, config_from_env
from verif.link.scoreboard import PacketBoard, Watchdog, describe_buffers
from verif.link.stimulus import random_packets


async def run_traffic(dut, cfg, seed, pattern, inject, eject, packets, malformed, log):
    n = cfg.torus.nodes
    rng = np.random.default_rng(seed)
    net = Network(cfg)
    board = PacketBoard(cfg)
    stim = random_packets(cfg, rng, packets, pattern=pattern, malformed=malformed)
    traffic = NodeTraffic(stim, board, inject, eject, rng)
    dog = Watchdog(200)
    ports = NodePorts(dut, n)
    inj_r, ej_v, ej_p = ports.inj_r, ports.ej_v, ports.ej_p
    cycle = 0
    start = time.perf_counter()
    while traffic.pending or board.outstanding:
        await RisingEdge(dut.clk)
        offers, ready = traffic.offers()
        ports.offer(offers)
        ports.set_ready(ready)
        await ReadOnly()
        for i, router in enumerate(net.routers):
            if bool(inj_r[i].value) != router.inject_ready:
                raise AssertionError(
                    f"cycle {cycle} (seed {seed}): node {i} inject.ready is {inj_r[i].value},"
                    f" the model says {router.inject_ready}"
                )
            want = router.eject_reg
            got = ej_p[i].value.to_unsigned() if ej_v[i].value else None
            if got != want:
                raise AssertionError(
                    f"cycle {cycle} (seed {seed}): node {i} ejection register is "
                    f"{got if got is None else hex(got)}, the model says "
                    f"{want if want is None else hex(want)}"
                )
        step = net.step(offers, ready)
        for i in step.accepted:
            traffic.accepted(i)
        for i, flit in step.ejected.items():
            board.eject(i, flit, cycle)
        moved = bool(step.accepted or step.ejected) or any(
            any(x is not None for x in r.link_reg) for r in net.routers
        )
        dog.tick(moved, board.outstanding, cycle, lambda: describe_buffers(cfg, net.routers))
        cycle += 1
    seconds = time.perf_counter() - start
    board.check_done()
    raw = dut.drops.value.to_unsigned()
    bits = cfg.counter_bits
    per_node = len(DropKind) * bits
    for i, router in enumerate(net.routers):
        word = raw >> (i * per_node)
        got = [word >> (k * bits) & ((1 << bits) - 1) for k in range(len(DropKind))]
        assert got == router.counters, f"node {i} drop counters {got} != {router.counters}"
    dropped = sum(p.bad is not None for mine in stim for p in mine)
    assert sum(sum(r.counters) for r in net.routers) == dropped
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
    n = cfg.torus.nodes
    pattern = os.environ.get("LINK_TRAFFIC", "uniform")
    packets = int(os.environ.get("LINK_PACKETS", "10"))
    malformed = float(os.environ.get("LINK_MALFORMED", "0.05"))
    totals = [0, 0.0, 0]
    for i, pair in enumerate(os.environ.get("LINK_PATTERNS", "always:always").split(",")):
        inject, eject = pair.split(":")
        await RisingEdge(dut.clk)
        for k in range(n):
            getattr(dut, f"inject__{k}__valid").value = 0
            getattr(dut, f"inject__{k}__payload").value = 0
            getattr(dut, f"eject__{k}__ready").value = 0
        dut.rst.value = 1
        for _ in range(2):
            await RisingEdge(dut.clk)
        dut.rst.value = 0
        done = await run_traffic(
            dut, cfg, seed + i, pattern, inject, eject, packets, malformed, dut._log
        )
        totals = [a + b for a, b in zip(totals, done, strict=True)]
    if os.environ.get("LINK_PERF_JSON"):
        with open(os.environ["LINK_PERF_JSON"], "w") as f:
            json.dump({"cycles": totals[0], "seconds": totals[1], "flits": totals[2]}, f)
