"""``python -m bench --only noc``: figures of the NeuronLink torus.

* Verilog generation of the 4x4x4 torus (``python -m hdl torus``, fresh interpreter);
* its Verilator build under cocotb from scratch: time and peak memory;
* Verilator under cocotb, the 4x4x4 RTL driven by the load sources at 50% of saturation
  (no model in the loop): cycles per second;
* the TLM on 4x4x4 at 50% of saturation: flit-hops (flits crossing a router-to-router link)
  simulated per second, for the compiled engine (:mod:`tlm.link.compiled`, one network, the whole
  ``simulate(engine="compiled")`` call as ``trnsim noc`` makes it, after a warm-up call; its
  numba compile time into an empty cache and its load from the cache are figures of their
  own) and the per-router model (:class:`tlm.link.network.RouterNetwork`). Target >= 1,000,000.

Recorded with the other parts in ``build/bench/figures.json``. Measured and printed, never
asserted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

from .common import OUT, ROOT, build_in_child, generate

#: Saturation throughput of the 4x4x4 torus under uniform traffic, 4-flit packets (TLM,
#: docs/noc.md); the benchmarks run at half of it.
SATURATION_4X4X4 = 0.50


_FIRST_USE = """
import time
start = time.perf_counter()
from tlm.link.config import LinkConfig
from tlm.link.measure import simulate
simulate(LinkConfig((4, 4)), cycles=10)
print(time.perf_counter() - start)
"""


def _first_use(cache_dir) -> float:
    """Seconds of a fresh interpreter's first compiled study (imports included), with numba's
    cache in ``cache_dir``."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache_dir)}
    result = subprocess.run(
        [sys.executable, "-c", _FIRST_USE], capture_output=True, text=True, cwd=ROOT, env=env
    )
    if result.returncode:
        raise RuntimeError(f"the compiled engine failed:\n{result.stderr[-3000:]}")
    return float(result.stdout.strip().splitlines()[-1])


def bench_fast(rate: float, cycles=20000) -> list[dict]:
    """The compiled engine on one network: ``trnsim noc --shape 4x4x4 --rate RATE``."""
    from tlm.link.config import LinkConfig
    from tlm.link.measure import simulate

    with tempfile.TemporaryDirectory() as cache:
        compile_s = _first_use(cache)  # empty cache: compiles every kernel
        cached_s = _first_use(cache)  # a later process: loads them
    cfg = LinkConfig((4, 4, 4))
    simulate(cfg, "uniform", rate, 100, seed=1)  # compiled or loaded in this process
    start = time.perf_counter()
    result = simulate(cfg, "uniform", rate, cycles, seed=1, warmup=0)
    seconds = time.perf_counter() - start
    hops = round(sum(link["utilisation"] for link in result["links"]) * cycles)
    return [
        {
            "figure": f"TLM compiled engine (tlm.link.compiled), one 4x4x4 network uniform at "
            f"{rate:.2f} flits/node/cycle, {cycles} cycles: flit-hops/s",
            "value": hops / seconds,
            "unit": "flit-hops/s",
            "target": ">= 1,000,000",
            "naive": "",
        },
        {
            "figure": "TLM compiled engine at the same load: network cycles/s",
            "value": cycles / seconds,
            "unit": "cycles/s",
            "target": "",
            "naive": "",
        },
        {
            "figure": "TLM compiled engine: first use with an empty numba cache (compile)",
            "value": compile_s,
            "unit": "s",
            "target": "",
            "naive": "",
        },
        {
            "figure": "TLM compiled engine: first use in a later process (cache load)",
            "value": cached_s,
            "unit": "s",
            "target": "",
            "naive": "",
        },
    ]


def bench_tlm(cycles=3000) -> list[dict]:
    from tlm.link.config import LinkConfig
    from tlm.link.network import RouterNetwork
    from tlm.link.sources import LoadSources, advance

    cfg = LinkConfig((4, 4, 4))
    rate = SATURATION_4X4X4 / 2
    fast_rows = bench_fast(rate)
    sources = LoadSources(cfg, "uniform", rate, cycles, seed=1)
    net = RouterNetwork(cfg)
    start = time.perf_counter()
    for _ in range(cycles):
        advance(net, sources)
    seconds = time.perf_counter() - start
    hops = sum(sum(x[1:]) for x in net.link_flits)  # port 0 counts ejections, not hops
    return fast_rows + [
        {
            "figure": f"TLM per-router model (RouterNetwork) 4x4x4 uniform at {rate:.2f} "
            "flits/node/cycle: flit-hops/s",
            "value": hops / seconds,
            "unit": "flit-hops/s",
            "target": "",
            "naive": "",
        },
        {
            "figure": "TLM per-router model 4x4x4 at the same load: network cycles/s",
            "value": cycles / seconds,
            "unit": "cycles/s",
            "target": "",
            "naive": "",
        },
    ]


def bench_gen() -> list[dict]:
    out = OUT / "torus_4x4x4.v"
    wall, info = generate("torus", ["--shape", "4x4x4"], out)
    return [
        {
            "figure": "Verilog generation torus 4x4x4",
            "value": wall,
            "unit": "s",
            "target": "",
            "naive": "",
        },
        {
            "figure": "Verilog size torus 4x4x4",
            "value": info["bytes"] / 1e6,
            "unit": "MB",
            "target": "",
            "naive": "",
        },
    ]


def bench_rtl(cycles=2000) -> list[dict]:
    from tlm.link.config import LinkConfig
    from verif.common.runner import run
    from verif.link.build import build_link

    cfg = LinkConfig((4, 4, 4))
    built = build_in_child(
        "from tlm.link.config import LinkConfig\nfrom verif.link.build import build_link",
        "build_link('verilator', 'torus', LinkConfig((4, 4, 4)), fresh=True)",
    )
    simbuild = build_link("verilator", "torus", cfg)  # the build just made
    perf = OUT / "noc_rtl_load.json"
    rate = SATURATION_4X4X4 / 2
    run(
        simbuild,
        "verif.link.bench_load",
        env={
            "LINK_SHAPE": "4x4x4",
            "LINK_RATES": rate,
            "LINK_CYCLES": cycles,
            "SEED": 1,
            "LINK_LOAD_JSON": perf,
            "PYTHONPATH": ROOT,
        },
        test_dir=simbuild.build_dir / "bench",
    )
    (point,) = json.loads(perf.read_text())
    return [
        {
            "figure": "Verilator build under cocotb, torus 4x4x4",
            "value": built["seconds"],
            "unit": "s",
            "target": "",
            "naive": "",
        },
        {
            "figure": "Verilator build peak memory, torus 4x4x4",
            "value": built["peak_gib"],
            "unit": "GiB",
            "target": "",
            "naive": "",
        },
        {
            "figure": f"Verilator under cocotb, torus 4x4x4 at {rate:.2f} (load sources only)",
            "value": cycles / point["sim_seconds"],
            "unit": "cycles/s",
            "target": "",
            "naive": "",
        },
    ]


def bench_large() -> list[dict]:
    """``trnsim noc`` on the largest 3-D tori for two cycles, the whole command: what a user
    waits for before a simulation of a large torus starts (its bounds, route tables, state)."""
    rows = []
    for shape in ("8x16x16", "16x16x16"):
        argv = [sys.executable, "-m", "tlm", "noc", "--shape", shape, "--cycles", "2"]
        argv += ["--warmup", "0", "--rate", "0.1", "--json"]
        start = time.perf_counter()
        subprocess.run(argv, cwd=ROOT, check=True, capture_output=True)
        rows.append(
            {
                "figure": f"trnsim noc --shape {shape} --cycles 2, whole command",
                "value": time.perf_counter() - start,
                "unit": "s",
                "target": "",
                "naive": "over 60 s (the bound walked every pair)" if shape == "8x16x16" else "",
            }
        )
    return rows


def bench_noc() -> list[dict]:
    return bench_tlm() + bench_large() + bench_gen() + bench_rtl()
