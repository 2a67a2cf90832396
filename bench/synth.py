"""``python -m bench --only synth``: synthesis figures of every block (``make synth``).

Runs ``python -m hdl.synth --fresh`` in a fresh interpreter (every netlist synthesised again,
so the times are real) and records, per block, its cells, flops, longest register-to-register
stage in generic gate levels and wall time, the whole run's wall time (target: 10 minutes) and
largest process, and the area proxy of each format set's PE array over int8's, at the default
PE stages and in one stage (:mod:`hdl.synth.area`).
The depth target is what one stage holds at the preset's tensor engine clock in a 5 nm-class
process (:mod:`hdl.synth.clock`). Measured and printed, never asserted.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

from .common import ROOT

#: The naive design's figures (../shared/TOOLCHAIN.md, "Synthesis figures": synth; ltp): the
#: every-format PE was then one stage, the block now named pe_all_1stage.
NAIVE = {
    ("pe_all_1stage", "levels"): "300-365",
    ("router_4x4", "cells"): "17 k",
    ("router_4x4", "flops"): "3,100",
    ("router_4x4", "levels"): "92",
}


def bench_synth() -> list[dict]:
    start = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "hdl.synth", "--fresh", "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    wall = time.perf_counter() - start
    if result.returncode:
        raise RuntimeError(f"python -m hdl.synth failed:\n{result.stderr[-3000:]}")
    record = json.loads(result.stdout.strip().splitlines()[-1])
    budget = record["clock"]["levels_per_stage"]["5nm"]  # at the preset's clock
    rows = []
    for name, b in record["blocks"].items():
        for key, label, unit, value, target in (
            ("cells", "cells", "cells", b["cells"], ""),
            ("flops", "flops", "flops", b["flops"], ""),
            ("levels", "longest stage", "levels", b["depth_levels"], f"<= {budget} at 5 nm"),
            ("seconds", "synthesis wall time", "s", b["seconds"]["total"], ""),
        ):
            rows.append(
                {
                    "figure": f"{name}: {label}",
                    "value": value,
                    "unit": unit,
                    "target": target,
                    "naive": NAIVE.get((name, key), ""),
                }
            )
    jobs = record.get("jobs", 1)
    rows.append(
        {
            "figure": f"make synth, every block from scratch (fresh interpreter, {jobs} at once)",
            "value": wall,
            "unit": "s",
            "target": "<= 600 s",
            "naive": "",
        }
    )
    if "peak_rss_mib" in record:
        rows.append(
            {
                "figure": "make synth, largest process (a worker or its Yosys)",
                "value": record["peak_rss_mib"] / 1024,
                "unit": "GiB",
                "target": "",
                "naive": "",
            }
        )
    rows += area_rows(record.get("area", {}))
    return rows


def area_rows(area: dict) -> list[dict]:
    """The area proxy's rows (:mod:`hdl.synth.area`): each format set's 128x128 PE array over
    int8's in NAND2 equivalents at its default stages, the float sets' over their own array in
    one stage (what the pipeline costs), and the float sets in one stage over int8's."""
    rows = []

    def row(figure, value):
        rows.append({"figure": figure, "value": value, "unit": "x", "target": "", "naive": ""})

    for entry in area.get("format_sets", {}).values():
        row(
            f"area proxy: {entry['label']} PE array (128 x slice), NAND2 equivalents over int8's",
            entry.get("over_int8", {}).get("array", {}).get("nand2_eq", 1.0),
        )
        over_one = entry.get("over_one_stage", {}).get("array", {}).get("nand2_eq")
        if over_one is not None:
            row(
                f"area proxy: {entry['label']} PE array over its one-stage array's "
                "(NAND2 equivalents)",
                over_one,
            )
    for entry in area.get("one_stage", {}).get("format_sets", {}).values():
        over = entry.get("over_int8", {}).get("array", {}).get("nand2_eq")
        if over is not None:
            row(
                f"area proxy: {entry['label']} one-stage PE array, NAND2 equivalents over int8's",
                over,
            )
    return rows
