"""cocotb load run of a torus network: the sources of :func:`tlm.link.measure.simulate` drive
the RTL, and the figures are measured from the RTL's own ejection ports.

Used for the RTL points of the latency-load plots (``tools/noc_figures.py``) and the speed
figures of ``make bench``. Configured by environment: ``LINK_SHAPE``, ``LINK_TRAFFIC``,
``LINK_RATES`` (comma-separated), ``LINK_CYCLES``, ``LINK_LENGTH``, ``SEED``,
``LINK_LOAD_JSON`` (output: a list of figures, one per rate, with ``sim_seconds``).
"""

from __future__ import annotations

import json
import os
import time

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ReadOnly, RisingEdge

from tlm.link.config import LinkConfig
from tlm.link.sources import LoadSources
from verif.link.ports import NodePorts


@cocotb.test()
async def load_points(dut):
    cfg = LinkConfig(os.environ.get("LINK_SHAPE", "4x4"))
    n = cfg.torus.nodes
    pattern = os.environ.get("LINK_TRAFFIC", "uniform")
    cycles = int(os.environ.get("LINK_CYCLES", "2000"))
    length = int(os.environ.get("LINK_LENGTH", "4"))
    seed = int(os.environ.get("SEED", "0"))
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    ports = NodePorts(dut, n)
    inj_r, ej_v, ej_p = ports.inj_r, ports.ej_v, ports.ej_p
    results = []
    for rate in [float(r) for r in os.environ.get("LINK_RATES", "0.1").split(",")]:
        await RisingEdge(dut.clk)
        ports.idle()
        ports.set_ready([1] * n)
        dut.rst.value = 1
        for _ in range(2):
            await RisingEdge(dut.clk)
        dut.rst.value = 0
        sources = LoadSources(cfg, pattern, rate, cycles, length=length, seed=seed)
        start = time.perf_counter()
        for _ in range(cycles):
            await RisingEdge(dut.clk)
            offers = sources.offers()
            ports.offer(offers)
            await ReadOnly()
            for i in offers:
                if inj_r[i].value:
                    sources.accepted(i)
            for i in range(n):
                if ej_v[i].value:
                    sources.ejected(i, ej_p[i].value.to_unsigned())
            sources.end_cycle()
        seconds = time.perf_counter() - start
        result = sources.result() | {"sim_seconds": seconds, "seed": seed}
        dut._log.info(
            "rate %.3f: accepted %.3f, latency mean %s, %.0f cycles/s",
            rate,
            result["accepted"],
            result["latency_mean"],
            cycles / seconds,
        )
        results.append(result)
    if os.environ.get("LINK_LOAD_JSON"):
        with open(os.environ["LINK_LOAD_JSON"], "w") as f:
            json.dump(results, f)
