"""``python -m bench --only noc``: figures of the NeuronLink torus.

* Verilog generation of the 4x4x4 torus (``python -m hdl torus``, fresh interpreter);
* its Verilator build under cocotb from scratch: time and peak memory;
* Verilator under cocotb, the 4x4x4 RTL driven by the load sources at 50% of saturation
  (no model in the loop): cycles per second;
* the TLM on 4x4x4 at 50% of saturation: flit-hops (flits crossing a router-to-router link)
  simulated per second, for the per-router model (:class:`tlm.link.network.Network`) and the
  vectorised one (:class:`tlm.link.batch.BatchNetwork`) on one network and on a batch of 128
  (128 independent runs of the load point at once). Target >= 1,000,000.

Writes ``build/bench/noc.json``. Measured and printed, never asserted.
"""

from __future__ import annotations

import json
import time

from .common import OUT, ROOT, build_in_child, generate

#: Saturation throughput of the 4x4x4 torus under uniform traffic, 4-flit packets (TLM,
#: docs/noc.md); the benchmarks run at half of it.
SATURATION_4X4X4 = 0.50


def bench_tlm(cycles=3000) -> list[dict]:
    from tlm.link.config import LinkConfig
    from tlm.link.load import LoadSources, advance
    from tlm.link.network import Network

    cfg = LinkConfig((4, 4, 4))
    rate = SATURATION_4X4X4 / 2
    sources = LoadSources(cfg, "uniform", rate, cycles, seed=1)
    net = Network(cfg)
    start = time.perf_counter()
    for _ in range(cycles):
        advance(net, sources)
    seconds = time.perf_counter() - start
    hops = sum(sum(x) for x in net.link_flits)
    from tlm.link.batch_load import simulate_batch

    batch_rows = []
    for batch, n_cycles in ((1, cycles), (128, cycles // 3)):
        start = time.perf_counter()
        _, bnet = simulate_batch(cfg, "uniform", [rate] * batch, n_cycles, seed=1)
        took = time.perf_counter() - start
        batch_rows.append(
            {
                "figure": f"TLM vectorised (BatchNetwork), batch of {batch}, same load: "
                "flit-hops/s",
                "value": float(bnet.link_flits.sum()) / took,
                "unit": "flit-hops/s",
                "target": ">= 1,000,000",
                "naive": "",
            }
        )
    return batch_rows + [
        {
            "figure": f"TLM per-router model (Network) 4x4x4 uniform at {rate:.2f} "
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


def bench_noc() -> list[dict]:
    rows = bench_tlm() + bench_gen() + bench_rtl()
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "noc.json").write_text(json.dumps(rows, indent=2))
    return rows
