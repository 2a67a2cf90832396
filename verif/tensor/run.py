"""``make sim`` / ``python -m verif.tensor.run``: one bench run of the tensor engine, with
waveforms on request, and ``make waves`` to look at them in GTKWave.

Examples::

    python -m verif.tensor.run --sim verilator --rows 8 --cols 8 --seed 1 --waves
    python -m verif.tensor.run --open-waves
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

from hdl.arith import FORMS
from hdl.gen import default_slice_cols
from tlm.tensor.config import STATUS_COUNTER_BITS, EngineConfig
from verif.common.run import open_waves, run_and_report, write_save
from verif.common.runner import ROOT, SIMULATORS
from verif.common.triage import Rerun
from verif.tensor.build import TOP, build_engine
from verif.tensor.stimulus import PATTERNS


def write_gtkw(cfg: EngineConfig, dump: Path, save: Path, sim: str) -> Path:
    """A GTKWave save file grouping the streams, the status and a 2x2 corner of the array."""
    from hdl.formats import acc_shape, operand_shape
    from hdl.tensor.layouts import load_beat, moving_beat, moving_lane, result_beat, status_layout

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
    for name, signals in groups.items():
        groups[name] = [(p, w, "dec" if "p_out" in p else "hex") for p, w in signals]
    comment = f"tensor engine {cfg.rows}x{cfg.cols} {cfg.format_tag}, {sim}"
    return write_save(save, dump, comment, TOP, groups)


def rerun(
    sim: str,
    cfg: EngineConfig,
    seed: int,
    *,
    ops: int,
    max_n: int,
    patterns: str,
    arith: str | None = None,
):
    """The ``make sim`` line of a bench run of ``cfg``'s engine on ``sim`` (``arith``: the
    arithmetic's form, if not the one chosen by size)."""
    formats = ",".join(f.name for f in cfg.formats)  # as make sim sends TE_FORMAT
    params = (("SIM", sim), ("ROWS", cfg.rows), ("COLS", cfg.cols), ("FORMAT", formats))
    params += (("OPS", ops), ("MAX_N", max_n), ("PATTERNS", patterns))
    if cfg.status_bits != STATUS_COUNTER_BITS:
        params += (("STATUS_BITS", cfg.status_bits),)
    if arith is not None:
        params += (("ARITH", arith),)
    return Rerun("sim", params, seed)


def bench_env(cfg: EngineConfig, *, ops: int, max_n: int, patterns: str) -> dict:
    """The ``TE_*`` environment of a run of :mod:`verif.tensor.bench` on ``cfg``'s engine:
    ``ops`` random ops a pattern triple, N up to ``max_n``, ``patterns`` (``ld:mv:ready``
    triples, comma-separated). The caller adds ``SEED`` (and ``PYTHONPATH``).

    Examples
    --------
    >>> env = bench_env(EngineConfig(2, 2, "all"), ops=4, max_n=8, patterns="random:random:random")
    >>> env["TE_FORMAT"], env["TE_STATUS_BITS"]
    ('int8,fp8_e4m3,fp8_e4m3fn,fp8_e5m2,bf16,fp16,tf32,fp32', 16)
    """
    return {
        "TE_ROWS": cfg.rows,
        "TE_COLS": cfg.cols,
        "TE_FORMAT": ",".join(f.name for f in cfg.formats),  # as make sim sends it
        "TE_OPS": ops,
        "TE_MAX_N": max_n,
        "TE_PATTERNS": patterns,
        "TE_STATUS_BITS": cfg.status_bits,
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m verif.tensor.run", description=__doc__.split("\n")[0]
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
    p.add_argument(
        "--status-bits",
        type=int,
        default=STATUS_COUNTER_BITS,
        help="width of each saturating misuse counter (narrow ones saturate in a short run)",
    )
    p.add_argument(
        "--arith",
        choices=FORMS,
        default=None,
        help="form of the datapath's arithmetic, proven equal (hdl/arith.py); default: "
        "words from 64x64 PEs, else gates",
    )
    p.add_argument("--waves", action="store_true", help="write a waveform and a GTKWave save file")
    p.add_argument("--open-waves", action="store_true", help="open the last waveform in GTKWave")
    p.add_argument("--json", action="store_true", help="print the outcome as JSON")
    args = p.parse_args(argv)

    if args.open_waves:
        return open_waves(f"{TOP}_*.gtkw", "sim")

    try:
        cfg = EngineConfig(args.rows, args.cols, args.format, status_bits=args.status_bits)
    except ValueError as error:
        print(f"python -m verif.tensor.run: error: {error}", file=sys.stderr)
        return 2
    seed = args.seed if args.seed is not None else random.randrange(1 << 31)
    print(f"engine {cfg.rows}x{cfg.cols} {cfg.format_tag} on {args.sim}, seed {seed}")
    start = time.perf_counter()
    simbuild = build_engine(args.sim, cfg, waves=args.waves, arith=args.arith)
    env = bench_env(cfg, ops=args.ops, max_n=args.max_n, patterns=args.patterns)
    env |= {"SEED": seed, "PYTHONPATH": ROOT}
    return run_and_report(
        simbuild,
        "verif.tensor.bench",
        env,
        {"sim": args.sim, "rows": cfg.rows, "cols": cfg.cols, "seed": seed},
        seed=seed,
        started=start,
        waves=args.waves,
        dump_name=f"{TOP}_{cfg.tag}_{args.sim}_seed{seed}",
        write_gtkw=lambda dump, save: write_gtkw(cfg, dump, save, args.sim),
        waves_target="waves",
        as_json=args.json,
    )


if __name__ == "__main__":
    sys.exit(main())
