"""cocotb bench of a collective on the RTL 4x4 torus: an all-gather whose packets carry the real
chunk bytes, reassembled at every rank and checked against the values engine.

The schedule is ``tlm.collectives.build(algo, "all_gather", load_system("trn2-server"))``
(chip ``c`` on torus node ``c``); the inputs are random bits of the format (NaN patterns
excepted, :func:`verif.link.collective.random_inputs`), drawn from the seed. Step by step,
:class:`~verif.link.collective.CollectiveTraffic` turns what each transfer carries into packets
(:mod:`tlm.collectives.packets`), queues them on their source nodes' injection ports, and
reassembles what the ejection ports deliver into the bench's buffers; a step starts when the
one before has been delivered (a barrier: the schedules are chains, so nothing the schedule
allows is held back). Every cycle :class:`~verif.link.lockstep.Lockstep` holds the RTL to
:class:`tlm.link.network.RouterNetwork` (each flit accepted and ejected at the cycle the model
predicts). At the end every rank's buffer equals ``values.run`` and ``values.reference`` bit
for bit, no drop counter has moved, and the watchdog has failed the test if ever no flit moved
for 200 cycles while packets were outstanding.

Configured by environment: ``COLL_ALGO`` (ring, kangaring, rdh or mesh; default ring),
``COLL_FORMAT`` (default bf16), ``COLL_COUNT`` (elements of the gathered buffer, a multiple of
16; default 208: 26-byte bf16 blocks, a full and a partial packet each;
:func:`~verif.link.collective.settings_from_env`), ``LINK_PATTERNS``
(``inject:eject`` pairs, comma-separated: one run each, with seed ``SEED + i``), ``SEED``,
``LINK_SHAPE``/``LINK_VCS``/``LINK_DEPTH`` (the torus must be 4x4), ``COLL_JSON`` (output:
cycles, seconds, flits, bytes).
"""

from __future__ import annotations

import json
import os
import time

import cocotb
import numpy as np
from cocotb.clock import Clock

from tlm.system import load_system
from verif.coverage.db import write_run
from verif.link.collective import (
    SYSTEM,
    CollectiveTraffic,
    collective_schedule,
    random_inputs,
    settings_from_env,
)
from verif.link.lockstep import Lockstep
from verif.link.ports import config_from_env


async def run_collective(lockstep, schedule, fmt, count, seed, inject, eject, log):
    """Reset, then run ``schedule`` on random inputs drawn from ``seed`` under the ``inject``
    and ``eject`` patterns, in lockstep with the model; check the result."""
    await lockstep.reset(seed)
    lockstep.coverage.patterns(inject, eject)
    rng = np.random.default_rng(seed)
    inputs = random_inputs(fmt, schedule.ranks, count // schedule.ranks, rng)
    traffic = CollectiveTraffic(lockstep.cfg, schedule, inputs, inject, eject, rng)
    start = time.perf_counter()
    while not traffic.done:
        step = await lockstep.step(*traffic.offers())
        traffic.observe(step, lockstep.net)
    seconds = time.perf_counter() - start
    traffic.check()
    counters = await lockstep.counters()
    assert not any(map(any, counters)), f"drop counters moved: {counters}"
    log.info(
        "%s all_gather, %s x %d, %s:%s: %d steps, %d packets (%d flits, %d bytes) delivered, "
        "%d cycles, %.0f cycles/s, results equal values.run and values.reference (seed %d)",
        schedule.algorithm,
        fmt,
        count,
        inject,
        eject,
        traffic.steps_done,
        traffic.board.delivered,
        traffic.board.flits,
        traffic.bytes,
        traffic.cycle,
        traffic.cycle / seconds,
        seed,
    )
    return traffic.cycle, seconds, traffic.board.flits, traffic.bytes


@cocotb.test()
async def all_gather(dut):
    """COLL_ALGO's all-gather under each pattern pair of LINK_PATTERNS."""
    cfg, seed = config_from_env()
    algo, fmt, count = settings_from_env()
    schedule = collective_schedule(algo)
    torus = load_system(SYSTEM).torus
    if cfg.shape != torus.shape:
        raise ValueError(f"LINK_SHAPE must be {torus.name} ({SYSTEM}'s torus), not {cfg.shape}")
    dut._log.info(
        "%s all_gather of %d %s on the %s torus, seed %d (rerun with SEED=%d)",
        algo,
        count,
        fmt,
        cfg.torus.name,
        seed,
        seed,
    )
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    lockstep = Lockstep(dut, cfg, seed)
    totals = [0, 0.0, 0, 0]
    for i, pair in enumerate(os.environ.get("LINK_PATTERNS", "always:always").split(",")):
        inject, eject = pair.split(":")
        done = await run_collective(
            lockstep, schedule, fmt, count, seed + i, inject, eject, dut._log
        )
        totals = [a + b for a, b in zip(totals, done, strict=True)]
    meta = {"bench": "collective", "algo": algo, "format": fmt, "config": cfg.tag, "seed": seed}
    write_run(f"collective-{algo}-{fmt}-{seed}", meta)
    if os.environ.get("COLL_JSON"):
        with open(os.environ["COLL_JSON"], "w") as f:
            keys = ("cycles", "seconds", "flits", "bytes")
            json.dump(dict(zip(keys, totals, strict=True)), f)
