"""``python -m bench --only coll``: figures of the collective models.

* the analytic engine: collective-cost evaluations per second, one vectorised call over a
  million sizes (the cluster search's inner loop; target >= 1,000,000/s), for the 64-rank ring
  all-reduce on the UltraServer and the hierarchical all-reduce on 4 UltraServers over EFA;
* building a schedule and its closed form (routes, link loads) once, for the same two;
* ``trnsim collective --no-runtime``'s sweep: 5 operations x 30 sizes (128 B .. 64 GiB) on the
  64-chip UltraServer, wall time in-process, on the flow engine (the issue's target: <= 5 s)
  and on the analytic engine beside it; and as shipped (nccom-test's placement, 4 ranks a
  chip, the runtime's costs) on the analytic engine, its schedules built in the run, and the
  all-reduce alone on the flow engine;
* the flow engine: a 64-rank ring all-reduce of 1 GiB on the UltraServer (target <= 50 ms),
  on a fresh engine and with the rates memoised by an earlier run, and its FluidNetwork
  events (rate changes) per second;
* the flit engine: a 64 KiB all-reduce on the UltraServer's 4x4x4 torus (target <= 10 s), by
  ``auto``'s pick (mesh) and by the ring, on a fresh engine (packets planned, then simulated;
  the kernels already compiled), with network cycles and flits per second;
* the values engine: a 64-rank ring all-reduce of 64 Ki bf16 elements per rank, seconds.

Measured and printed, never asserted.
"""

from __future__ import annotations

import numpy as np

from .common import best_time

__all__ = ["bench_collectives"]


def bench_collectives() -> list[dict]:
    from tlm.collectives import Analytic, build
    from tlm.collectives.flit import FlitEngine
    from tlm.collectives.flow import Flow
    from tlm.collectives.values import run
    from tlm.studies import run_study
    from tlm.system import load_system

    rows = []
    sizes = np.arange(1, 1_000_001, dtype=np.int64) * 64
    for label, spec, algo in (
        ("ring all-reduce, trn2 UltraServer (64 ranks)", "trn2-ultraserver", "ring"),
        (
            "hierarchical all-reduce, 4 UltraServers (256 ranks)",
            "4xtrn2-ultraserver",
            "hierarchical",
        ),
    ):
        made = {}

        def make(spec=spec, algo=algo, made=made):  # a fresh system: nothing kept from before
            system = load_system(spec)
            made["cost"] = Analytic(build(algo, "all_reduce", system), system)

        setup = best_time(make, repeat=2)
        cost = made["cost"]
        each = best_time(lambda cost=cost: cost.time_s(sizes, 2))
        rows += [
            {
                "figure": f"analytic engine, {label}",
                "value": len(sizes) / each,
                "unit": "evaluations/s",
                "target": ">= 1,000,000",
                "naive": "",
            },
            {
                "figure": f"schedule + closed form built, {label}",
                "value": setup * 1e3,
                "unit": "ms",
                "target": "",
                "naive": "",
            },
        ]
    ops = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all", "broadcast")
    links = {"system": "ultraserver", "runtime": False}  # one rank a chip, the links alone
    run_study("collective", op="all_reduce", sizes="8B", **links)  # imports, caches

    for engine, target in (("flow", "<= 5 s"), ("analytic", "")):
        run_study("collective", sizes="8B", engine=engine, **links)  # caches

        def sweep(engine=engine):
            for op in ops:
                run_study("collective", op=op, sizes="128B..64GiB", engine=engine, **links)

        sweep_s = best_time(sweep, repeat=3 if engine == "analytic" else 2)
        rows.append(
            {
                "figure": f"trnsim collective --no-runtime sweep, 5 ops x 30 sizes, UltraServer "
                f"({engine})",
                "value": sweep_s,
                "unit": "s",
                "target": target,
                "naive": "",
            }
        )

    def ranks_sweep():  # as shipped: nccom-test's placement, 4 ranks a chip, the runtime's costs
        for op in ops:
            run_study("collective", system="ultraserver", op=op, sizes="512B..64GiB")

    def ranks_flow():
        run_study("collective", system="ultraserver", sizes="128B..64GiB", engine="flow")

    rows += [
        {
            "figure": "trnsim collective sweep, 5 ops x 28 sizes, UltraServer's 256 ranks "
            "(analytic, schedules over the ranks built in the run)",
            "value": best_time(ranks_sweep, repeat=1),
            "unit": "s",
            "target": "",
            "naive": "",
        },
        {
            "figure": "trnsim collective --engine flow, all-reduce x 30 sizes, UltraServer's "
            "256 ranks",
            "value": best_time(ranks_flow, repeat=1),
            "unit": "s",
            "target": "",
            "naive": "",
        },
    ]
    system = load_system("trn2-ultraserver")
    ring = Analytic(build("ring", "all_reduce", system), system)
    fresh = {}

    def cold():  # a fresh engine: every rate computed (no memo from an earlier size)
        fresh["flow"] = Flow(ring.schedule, system, ring)
        fresh["flow"].time_s([1 << 30], 2)

    cold_s = best_time(cold, repeat=3)
    flow = fresh["flow"]
    flow_s = best_time(lambda: flow.time_s([1 << 30], 2), repeat=3)
    rows += [
        {
            "figure": "flow engine, 64-rank ring all-reduce of 1 GiB, UltraServer",
            "value": cold_s * 1e3,
            "unit": "ms",
            "target": "<= 50",
            "naive": "",
        },
        {
            "figure": "the same, rates memoised by an earlier run (a sweep's later sizes)",
            "value": flow_s * 1e3,
            "unit": "ms",
            "target": "",
            "naive": "",
        },
        {
            "figure": "flow engine events (rate changes) per second, fresh engine",
            "value": flow.events / cold_s,
            "unit": "events/s",
            "target": "",
            "naive": "",
        },
    ]
    system = load_system("trn2-ultraserver")
    FlitEngine(build("ring", "all_reduce", system), system).time_s([64], 2)  # kernels loaded
    for algo in ("mesh", "ring"):
        schedule = build(algo, "all_reduce", system)
        made = {}

        def flit_run(schedule=schedule, made=made):  # a fresh engine: packets planned anew
            made["engine"] = FlitEngine(schedule, system)
            made["t"] = float(made["engine"].time_s([64 << 10], 2)[0])

        flit_s = best_time(flit_run, repeat=2)
        engine = made["engine"]
        again_s = best_time(lambda engine=engine: engine.time_s([64 << 10], 2), repeat=2)
        pick = " (auto's pick)" if algo == "mesh" else ""
        rows += [
            {
                "figure": f"flit engine, 64 KiB {algo} all-reduce{pick}, UltraServer 4x4x4",
                "value": flit_s,
                "unit": "s",
                "target": "<= 10" if algo == "mesh" else "",
                "naive": "",
            },
            {
                "figure": f"... {engine.cycles:,} cycles stepped of {engine.end_cycle:,} "
                f"({made['t'] * 1e6:.2f} us), {engine.flits:,} flits",
                "value": engine.cycles / flit_s,
                "unit": "cycles/s",
                "target": "",
                "naive": "",
            },
            {
                "figure": "... flits ejected per second",
                "value": engine.flits / flit_s,
                "unit": "flits/s",
                "target": "",
                "naive": "",
            },
            {
                "figure": "... the simulation alone (the engine run again: packets planned)",
                "value": engine.cycles / again_s,
                "unit": "cycles/s",
                "target": "",
                "naive": "",
            },
        ]
    schedule = build("ring", "all_reduce", system)
    import ml_dtypes

    x = np.random.default_rng(0).uniform(-1, 1, (64, 65536)).astype(ml_dtypes.bfloat16)
    values_s = best_time(lambda: run(schedule, x), repeat=2)
    rows.append(
        {
            "figure": "values engine, 64-rank ring all-reduce of 64 Ki bf16 per rank",
            "value": values_s,
            "unit": "s",
            "target": "",
            "naive": "",
        }
    )
    return rows
