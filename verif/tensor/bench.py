"""cocotb bench of the tensor engine: random ops, idle and backpressure, lockstep TLM.

Configured by environment (the pytest entry point ``tests/test_verif_tensor.py`` sets it):
``TE_ROWS``, ``TE_COLS``, ``TE_FORMAT``, ``TE_PE_STAGES``, ``TE_DECODE_STAGES`` (unset: the
defaults), ``SEED``, ``TE_OPS``, ``TE_MAX_N``, ``TE_PATTERNS`` (comma-separated ``ld:mv:ready``
triples from :data:`verif.tensor.stimulus.PATTERNS`; triple ``i`` draws from sub-seed ``SEED +
i``), ``TE_MISUSE`` (0/1), ``TE_STATUS_BITS`` (the status counters' width), ``TE_PERF_JSON``
(write the cycles per second to this file), ``TE_PLANT_MISMATCH`` (1: a wrong expectation, for
the triage tests).

The single clocked loop drives both producers and the consumer, samples every port after the
design settles, and steps :class:`verif.tensor.scoreboard.Scoreboard` - one trigger pair per
cycle instead of one coroutine per stream keeps cocotb's overhead below the simulator's.
"""

from __future__ import annotations

import json
import os
import random
import time

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ReadOnly, RisingEdge

from verif.common.known import known
from verif.coverage.db import write_run
from verif.coverage.tensor import EngineCoverage
from verif.tensor.drivers import Traffic
from verif.tensor.scoreboard import Observed, Scoreboard
from verif.tensor.signals import Codec, config_from_env
from verif.tensor.stimulus import pattern, run_stimulus

#: Idle cycles compared after a run's last beat and result: the first shows the status that
#: beat left (a status register is written at the end of the cycle it counts in), the second
#: that it holds.
STATUS_TAIL = 2


def _config():
    cfg = config_from_env(os.environ)
    seed = int(os.environ.get("SEED") or random.randrange(1 << 31))
    return cfg, seed


async def _reset(dut):
    await RisingEdge(dut.clk)  # leave any ReadOnly phase before driving
    dut.ld_stream__valid.value = 0
    dut.mv_stream__valid.value = 0
    dut.ld_stream__payload.value = 0  # idle payloads are zeros, never X (Icarus is 4-state)
    dut.mv_stream__payload.value = 0
    dut.res_stream__ready.value = 0
    dut.rst.value = 1
    for _ in range(2):
        await RisingEdge(dut.clk)
    dut.rst.value = 0


async def run_traffic(dut, cfg, stim, seed, patterns, log, *, root=None, coverage=None):
    """Drive ``stim`` under ``patterns`` (ld, mv, ready names) with the scoreboard in lockstep;
    the patterns draw from ``seed``, a sub-seed of the bench's seed ``root``."""
    root = seed if root is None else root
    where = "" if seed == root else f"pattern triple {':'.join(patterns)} from sub-seed {seed}"
    rng = np.random.default_rng(seed)
    traffic = Traffic(stim, *(pattern(p, rng) for p in patterns))
    plant = os.environ.get("TE_PLANT_MISMATCH", "0") == "1"
    board = Scoreboard(cfg, root, where=where, plant_mismatch=plant, coverage=coverage)
    if coverage is not None:
        coverage.patterns(*patterns)
    codec = Codec(cfg)
    beats = len(stim.ld_beats) + len(stim.mv_beats)
    limit = 100 + 8 * (beats + cfg.latency)
    ld_v, ld_p, ld_r = dut.ld_stream__valid, dut.ld_stream__payload, dut.ld_stream__ready
    mv_v, mv_p, mv_r = dut.mv_stream__valid, dut.mv_stream__payload, dut.mv_stream__ready
    res_v, res_p, res_r = dut.res_stream__valid, dut.res_stream__payload, dut.res_stream__ready
    status = dut.status
    clk = dut.clk
    driven = [None, None]  # the ld and mv beats on the wires

    async def cycle(ld, mv, ready, cycles):
        """Drive one cycle, sample every output once the design settles, compare."""
        await RisingEdge(clk)
        if ld is not driven[0]:
            ld_v.value = ld is not None
            if ld is not None:
                ld_p.value = codec.load(ld)
            driven[0] = ld
        if mv is not driven[1]:
            mv_v.value = mv is not None
            if mv is not None:
                mv_p.value = codec.moving(mv)
            driven[1] = mv
        res_r.value = ready
        await ReadOnly()
        valid = bool(known(res_v.value, "res_stream__valid", cycles))
        if valid:
            data, last = codec.result(
                known(res_p.value, "res_stream__payload", cycles).to_unsigned()
            )
        else:
            data, last = None, False
        flags, counts = codec.status(known(status.value, "status", cycles).to_unsigned())
        observed = Observed(
            ld_ready=bool(known(ld_r.value, "ld_stream__ready", cycles)),
            mv_ready=bool(known(mv_r.value, "mv_stream__ready", cycles)),
            res_valid=valid,
            res_last=last,
            res_data=data,
            flags=flags,
            counts=counts,
        )
        return board.check(ld, mv, ready, observed)

    start = time.perf_counter()
    cycles = 0
    while not traffic.done:
        if cycles >= limit:
            raise AssertionError(
                f"no progress: {traffic.results}/{stim.results} results after {cycles} cycles"
                f" (seed {root}{', ' + where if where else ''})"
            )
        traffic.update(await cycle(*traffic.offers(), cycles))
        cycles += 1
    # The run ends in the cycle of its last beat or result; the misuse that beat flagged shows
    # in the status from the next cycle on. Compare the final status (and the idle ports) then.
    for _ in range(STATUS_TAIL):
        await cycle(None, None, True, cycles)
        cycles += 1
    seconds = time.perf_counter() - start
    log.info(
        "patterns %s: %d ops, %d results, %d loads, %d moving beats, misuse %s, %d cycles, "
        "%.0f cycles/s (seed %d, sub-seed %d)",
        ":".join(patterns),
        len(stim.ops),
        board.results,
        board.loads,
        board.moves,
        stim.misuse or "none",
        cycles,
        cycles / seconds,
        root,
        seed,
    )
    return cycles, seconds


@cocotb.test()
async def random_ops(dut):
    """Random nc_matmuls with misuse, under every pattern triple in TE_PATTERNS."""
    cfg, seed = _config()
    dut._log.info(
        "engine %dx%d %s, seed %d (rerun with SEED=%d)",
        cfg.rows,
        cfg.cols,
        ",".join(f.name for f in cfg.formats),
        seed,
        seed,
    )
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    ops = int(os.environ.get("TE_OPS", "12"))
    max_n = int(os.environ.get("TE_MAX_N", "32"))
    misuse = os.environ.get("TE_MISUSE", "1") == "1"
    triples = os.environ.get("TE_PATTERNS", "always:always:always").split(",")
    total_cycles, total_seconds = 0, 0.0
    coverage = EngineCoverage(cfg)
    for i, triple in enumerate(triples):
        patterns = triple.split(":")
        if len(patterns) != 3:
            raise ValueError(f"TE_PATTERNS entries must be ld:mv:ready, not {triple!r}")
        await _reset(dut)
        sub = seed + i
        stim = run_stimulus(cfg, seed, i, ops=ops, max_n=max_n, misuse=misuse)
        cycles, seconds = await run_traffic(
            dut, cfg, stim, sub, patterns, dut._log, root=seed, coverage=coverage
        )
        total_cycles += cycles
        total_seconds += seconds
    write_run(f"tensor-{cfg.tag}-{seed}", {"bench": "tensor", "engine": cfg.tag, "seed": seed})
    if os.environ.get("TE_PERF_JSON"):
        with open(os.environ["TE_PERF_JSON"], "w") as f:
            json.dump({"cycles": total_cycles, "seconds": total_seconds}, f)
