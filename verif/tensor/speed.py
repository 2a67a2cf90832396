"""cocotb speed probe: the engine kept busy at full rate, results read every cycle, no checks.

Measures what the simulator and cocotb cost per cycle, apart from the scoreboard. Configured by
``TE_ROWS``, ``TE_COLS``, ``TE_FORMAT``, ``TE_PE_STAGES``, ``TE_DECODE_STAGES`` (unset: the
defaults), ``TE_CYCLES`` and ``TE_PERF_JSON`` (where the figures go). An engine with several
formats is driven with BF16 ops when it has BF16.
"""

from __future__ import annotations

import json
import os
import time

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge

from tlm.tensor.timing import LoadBeat, MovingBeat
from verif.tensor.signals import Codec, config_from_env


@cocotb.test()
async def speed(dut):
    cfg = config_from_env(os.environ)
    names = [f.name for f in cfg.formats]
    fmt = cfg.formats[names.index("bf16")] if "bf16" in names else cfg.fmt
    code = cfg.code(fmt)

    def operands(n):
        if fmt.kind == "int":
            return rng.integers(-128, 128, n)
        return rng.standard_normal(n).astype(fmt.dtype)

    cycles = int(os.environ.get("TE_CYCLES", "2000"))
    codec = Codec(cfg)
    rng = np.random.default_rng(0)
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    dut.rst.value = 1
    dut.ld_stream__valid.value = 0
    dut.mv_stream__valid.value = 0
    dut.res_stream__ready.value = 1
    await ClockCycles(dut.clk, 2)
    dut.rst.value = 0
    # Back-to-back nc_matmuls of K=rows, N=512, each with a new stationary.
    loads = [
        codec.load(LoadBeat(operands(cfg.cols), cfg.rows, j == cfg.rows - 1, code))
        for j in range(cfg.rows)
    ]
    moves = [
        codec.moving(MovingBeat(operands(cfg.rows), j == 0, j == 511, code)) for j in range(512)
    ]
    dut.ld_stream__payload.value = loads[0]
    dut.mv_stream__payload.value = moves[0]
    dut.ld_stream__valid.value = 1
    dut.mv_stream__valid.value = 1
    li = mi = 0
    start = time.perf_counter()
    for _ in range(cycles):
        await RisingEdge(dut.clk)
        dut.ld_stream__payload.value = loads[li % len(loads)]
        dut.mv_stream__payload.value = moves[mi % len(moves)]
        await ReadOnly()
        li += bool(dut.ld_stream__ready.value)
        mi += bool(dut.mv_stream__ready.value)
        if dut.res_stream__valid.value:
            dut.res_stream__payload.value.to_unsigned()
    checked = time.perf_counter() - start
    start, cpu = time.perf_counter(), time.process_time()
    await ClockCycles(dut.clk, cycles)
    clock_only = time.perf_counter() - start
    clock_cpu = time.process_time() - cpu
    figures = {
        "cycles": cycles,
        "moving_beats": mi,
        "driven_cycles_per_s": cycles / checked,
        "clock_only_cycles_per_s": cycles / clock_only,
        # Cycles per second of CPU time (all of the simulator's threads): steadier than wall
        # time on a shared machine, and equal to it for a one-thread model on an idle one.
        "clock_only_cycles_per_cpu_s": cycles / clock_cpu,
    }
    dut._log.info("speed: %s", figures)
    if os.environ.get("TE_PERF_JSON"):
        with open(os.environ["TE_PERF_JSON"], "w") as f:
            json.dump(figures, f)
