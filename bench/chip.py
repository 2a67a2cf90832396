"""The chip model's figures for ``make bench`` (part ``chip``).

A 4096 x 4096 x 4096 GEMM on one trn2 chip, timing only: wall time to record and to simulate
it (target: <= 10 s together), simulated instructions and discrete events per second of wall
time, and what the model says of the GEMM (time, per cent of peak). Writes
``build/bench/chip.json`` too.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

__all__ = ["bench_chip"]


def _row(figure, value, unit, target=""):
    return {"figure": figure, "value": value, "unit": unit, "target": target, "naive": ""}


def bench_chip(out: Path | None = None) -> list[dict]:
    from tlm.kernels import build_gemm

    rows = []
    record = {}
    for dtype in ("bf16", "fp8_e4m3"):
        start = time.perf_counter()
        kernel, _, _ = build_gemm(4096, 4096, 4096, dtype)
        recorded = time.perf_counter()
        run = kernel.run()
        wall = time.perf_counter() - start
        sim = run.wall_s
        peak = kernel.spec.peak_flops(dtype)
        name = f"chip GEMM 4096^3 {dtype} (trn2, timing only)"
        figures = {
            "wall_s": wall,
            "record_s": recorded - start,
            "simulate_s": sim,
            "instructions": run.instructions,
            "events": run.events,
            "instructions_per_s": run.instructions / wall,
            "instructions_per_simulation_s": run.instructions / sim,
            "events_per_s": run.events / sim,
            "simulated_time_us": run.time_s * 1e6,
            "percent_of_peak": 100 * run.flops / run.time_s / peak,
        }
        record[dtype] = figures
        rows += [
            _row(
                f"{name}: wall time, record + simulate",
                wall,
                "s",
                "<= 10 s" if dtype == "bf16" else "",
            ),
            _row(
                f"{name}: instructions / wall s, record + simulate",
                figures["instructions_per_s"],
                "instr/s",
            ),
            _row(
                f"{name}: instructions / wall s of simulation",
                figures["instructions_per_simulation_s"],
                "instr/s",
            ),
            _row(f"{name}: events / wall s of simulation", figures["events_per_s"], "events/s"),
            _row(f"{name}: simulated time", figures["simulated_time_us"], "us"),
            _row(f"{name}: of the model's peak", figures["percent_of_peak"], "%"),
        ]
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "chip.json").write_text(json.dumps(record, indent=2))
    return rows
