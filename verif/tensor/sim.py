"""``make sim`` / ``python -m verif.tensor.sim``: one bench run of the tensor engine, with
waveforms on request, and ``make waves`` to look at them in GTKWave.

Examples::

    python -m verif.tensor.sim --sim verilator --rows 8 --cols 8 --seed 1 --waves
    python -m verif.tensor.sim --open-waves
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

from hdl.gen import default_slice_cols
from tlm.tensor.config import EngineConfig
from verif.common.runner import BUILD, ROOT, SIMULATORS, run
from verif.tensor.build import TOP, build_engine
from verif.tensor.stimulus import PATTERNS

WAVES = BUILD / "waves"


def _trace_name(prefix: str, path: str, width: int) -> str:
    return f"{prefix}{path}" + (f"[{width - 1}:0]" if width > 1 else "")


def write_gtkw(cfg: EngineConfig, dump: Path, save: Path, sim: str) -> Path:
    """A GTKWave save file grouping the streams, the status and a 2x2 corner of the array."""
    from vcd.gtkw import GTKWSave

    from hdl.formats import acc_shape, operand_shape
    from hdl.tensor.layouts import load_beat, moving_beat, moving_lane, result_beat, status_layout

    prefix = f"{TOP}."  # Icarus' FST and Verilator's VCD both scope the design by its top
    groups = {
        "ld_stream (LoadStationary)": [
            ("ld_stream__valid", 1),
            ("ld_stream__ready", 1),
            ("ld_stream__payload", load_beat(cfg).size),
        ],
        "mv_stream (MultiplyMoving)": [
            ("mv_stream__valid", 1),
            ("mv_stream__ready", 1),
            ("mv_stream__payload", moving_beat(cfg).size),
        ],
        "res_stream (results)": [
            ("res_stream__valid", 1),
            ("res_stream__ready", 1),
            ("res_stream__payload", result_beat(cfg).size),
        ],
        "status": [("status", status_layout(cfg).size)],
    }
    acc = acc_shape(cfg).width
    lane, op = moving_lane(cfg).size, operand_shape(cfg).width
    corner = []
    width = default_slice_cols(cfg.cols)  # the array is made of slices of `width` columns
    for c in range(min(2, cfg.cols)):
        for k in range(min(2, cfg.rows)):
            pe = f"array.col{c // width}.pe{k}_{c % width}."
            corner += [
                (pe + "a_out", lane),
                (pe + "p_out", acc),
                (pe + "w0", op),
                (pe + "w1", op),
            ]
    groups["array corner: PE(row, col) for rows, cols 0..1"] = corner
    save.parent.mkdir(parents=True, exist_ok=True)
    with open(save, "w") as f:
        gtkw = GTKWSave(f)
        gtkw.comment(f"tensor engine {cfg.rows}x{cfg.cols} {cfg.format_tag}, {sim}")
        gtkw.dumpfile(str(dump))
        gtkw.zoom_markers(-20.0)
        gtkw.trace(_trace_name(prefix, "clk", 1))
        gtkw.trace(_trace_name(prefix, "rst", 1))
        for name, signals in groups.items():
            with gtkw.group(name):
                for path, width in signals:
                    gtkw.trace(
                        _trace_name(prefix, path, width),
                        datafmt="dec" if "p_out" in path else "hex",
                    )
    return save


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m verif.tensor.sim", description=__doc__.split("\n")[0]
    )
    p.add_argument("--sim", choices=SIMULATORS, default="icarus")
    p.add_argument("--rows", type=int, default=8)
    p.add_argument("--cols", type=int, default=8)
    p.add_argument(
        "--format", default="int8", help="operand format(s): a name, a comma list, or 'all'"
    )
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--ops", type=int, default=8, help="random nc_matmuls per pattern triple")
    p.add_argument("--max-n", type=int, default=32, help="largest N drawn")
    p.add_argument(
        "--patterns",
        default="always:always:always,random:random:random",
        help=f"comma-separated ld:mv:ready triples of {', '.join(PATTERNS)}",
    )
    p.add_argument("--waves", action="store_true", help="write a waveform and a GTKWave save file")
    p.add_argument("--open-waves", action="store_true", help="open the last waveform in GTKWave")
    p.add_argument("--json", action="store_true", help="print the outcome as JSON")
    args = p.parse_args(argv)

    if args.open_waves:
        saves = sorted(WAVES.glob("*.gtkw"), key=lambda f: f.stat().st_mtime)
        if not saves:
            print("no waveform yet: run `make sim WAVES=1` first", file=sys.stderr)
            return 2
        cmd = ["gtkwave", str(saves[-1])]
        if shutil.which("gtkwave") is None or not os.environ.get("DISPLAY"):
            print(f"no gtkwave or no display here; on a desktop run: {' '.join(cmd)}")
            return 0
        return subprocess.call(cmd)

    try:
        cfg = EngineConfig(args.rows, args.cols, args.format)
    except ValueError as error:
        print(f"python -m verif.tensor.sim: error: {error}", file=sys.stderr)
        return 2
    seed = args.seed if args.seed is not None else random.randrange(1 << 31)
    print(f"engine {cfg.rows}x{cfg.cols} {cfg.format_tag} on {args.sim}, seed {seed}")
    start = time.perf_counter()
    simbuild = build_engine(args.sim, cfg, waves=args.waves)
    test_dir = simbuild.build_dir / f"run-{seed}"
    outcome = {
        "sim": args.sim,
        "rows": cfg.rows,
        "cols": cfg.cols,
        "seed": seed,
        "build_s": round(simbuild.build_seconds, 2),
        "build_cached": simbuild.cached,
    }
    try:
        run(
            simbuild,
            "verif.tensor.bench",
            waves=args.waves,
            test_dir=test_dir,
            env={
                "TE_ROWS": cfg.rows,
                "TE_COLS": cfg.cols,
                "TE_FORMAT": ",".join(f.name for f in cfg.formats),
                "SEED": seed,
                "TE_OPS": args.ops,
                "TE_MAX_N": args.max_n,
                "TE_PATTERNS": args.patterns,
                "PYTHONPATH": ROOT,
            },
        )
        outcome["passed"] = True
    except AssertionError as error:
        outcome["passed"] = False
        outcome["error"] = str(error)
    outcome["seconds"] = round(time.perf_counter() - start, 2)
    if args.waves:
        source = (
            (test_dir / "dump.vcd")
            if args.sim == "verilator"
            else (simbuild.build_dir / f"{TOP}.fst")
        )
        dump = WAVES / f"{TOP}_{cfg.tag}_{args.sim}{source.suffix}"
        WAVES.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, dump)
        save = write_gtkw(cfg, dump, dump.with_suffix(".gtkw"), args.sim)
        outcome.update(waveform=str(dump), gtkw=str(save))
    if args.json:
        print(json.dumps(outcome))
    else:
        print(
            ("PASS" if outcome["passed"] else "FAIL")
            + f" in {outcome['seconds']} s"
            + (f"; waves: {outcome['waveform']} (make waves)" if args.waves else "")
        )
        if not outcome["passed"]:
            print(outcome["error"])
    return 0 if outcome["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
