"""``trnsim``: the command line of the models (also ``python -m tlm``).

One subcommand per study, each with ``--help``, a table by default and ``--json`` for machines.

    trnsim tensor --k 128 --m 128 --n 64,128,512
"""

from __future__ import annotations

import argparse
import json
import sys

from .chip.cli import add_gemm_parser
from .cli_args import comma_list
from .link.cli import register as register_noc
from .tensor.config import EngineConfig
from .tensor.cost import MODES, matmul_cycles

#: Tensor engine clock of NeuronCore-v3 (TRN2_FACTS.md, "NeuronCore-v3 engines", source NKI2).
TENSOR_CLOCK_HZ = 2.4e9


_sizes = comma_list(int, "integers", "size")


def tensor_study(args) -> list[dict]:
    if not args.clock_hz > 0:
        raise ValueError(f"clock_hz must be a positive frequency in Hz, not {args.clock_hz!r}")
    cfg = EngineConfig(args.rows, args.cols, "all")
    rows = []
    for n in args.n:
        cycles = matmul_cycles(args.k, args.m, n, cfg=cfg, mode=args.mode, fmt=args.format)
        macs = args.k * args.m * n
        rows.append(
            {
                "k": args.k,
                "m": args.m,
                "n": n,
                "mode": args.mode,
                "format": args.format,
                "cycles": cycles,
                "time_ns": cycles / args.clock_hz * 1e9,
                "utilization": macs / (cycles * cfg.rows * cfg.cols),
                "tflops": 2 * macs / (cycles / args.clock_hz) / 1e12,
            }
        )
    return rows


def _print_table(title: str, rows: list[dict]):
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    for key in rows[0]:
        table.add_column(key, justify="right")
    for row in rows:
        table.add_row(*(f"{v:.3g}" if isinstance(v, float) else str(v) for v in row.values()))
    Console().print(table)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="trnsim", description="Models of a Trainium2-class machine.")
    sub = p.add_subparsers(dest="command", required=True)
    t = sub.add_parser("tensor", help="cost of nc_matmul on the tensor engine (exact for the RTL)")
    t.add_argument("--k", type=int, default=128, help="contraction size K (default 128)")
    t.add_argument("--m", type=int, default=128, help="stationary free size M (default 128)")
    t.add_argument("--n", type=_sizes, default=[512], help="moving size N, or a list: 64,128,512")
    t.add_argument(
        "--mode",
        choices=MODES,
        default="back_to_back",
        help="alone on an idle engine, back to back with new stationaries, or reusing one",
    )
    t.add_argument("--rows", type=int, default=128, help="PE rows (default 128)")
    t.add_argument("--cols", type=int, default=128, help="PE columns (default 128)")
    t.add_argument(
        "--format",
        default="bf16",
        help="operand format of the op (default bf16; fp32 runs at a quarter of the rate)",
    )
    t.add_argument(
        "--clock-hz",
        type=float,
        default=TENSOR_CLOCK_HZ,
        help="engine clock (default 2.4e9, NeuronCore-v3, NKI2)",
    )
    t.add_argument("--json", action="store_true", help="print JSON")
    t.set_defaults(study=tensor_study, title="nc_matmul on the tensor engine")
    add_gemm_parser(sub)
    register_noc(sub)
    return p


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    try:
        rows = args.study(args)
    except ValueError as error:
        print(f"trnsim {args.command}: error: {error}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(rows))
    else:
        _print_table(args.title, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
