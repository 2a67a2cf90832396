"""``python -m hdl <block> [parameters] -o FILE.v``: Verilog for a block.

FuseSoC's generator and ``make gen`` call this. Examples::

    python -m hdl tensor_engine --rows 128 --cols 128 -o build/gen/tensor_engine.v
    python -m hdl tensor_engine --rows 4 --cols 4 --json -o te.v
    python -m hdl tensor_engine --rows 8 --cols 8 --format bf16,fp8_e4m3,fp8_e5m2 -o te.v
    python -m hdl tensor_engine --format all --arith words -o te_sim.v
    python -m hdl torus --shape 4x4x4 -o build/gen/torus.v
    python -m hdl link_router --shape 4x4 --vcs 2 --depth 4 --width 64 -o router.v
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tlm.formats import MX_FORMATS, PE_FORMATS, format_set, get_format

from .arith import FORMS
from .gen import BLOCKS, LINK_BLOCKS, write_verilog


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m hdl", description="Generate Verilog for a block.")
    p.add_argument("block", choices=sorted(BLOCKS), help="block to generate")
    p.add_argument("--rows", type=int, default=128, help="PE rows, K (default 128)")
    p.add_argument("--cols", type=int, default=128, help="PE columns, M (default 128)")
    p.add_argument(
        "--format",
        dest="fmt",
        default="int8",
        help=f"operand format, or formats chosen per op: a comma-separated list of "
        f"{', '.join(PE_FORMATS)}, or 'all' (default int8; MX formats are TLM-only)",
    )
    p.add_argument("--shape", default="4x4", help="link blocks: torus shape (default 4x4)")
    p.add_argument("--vcs", type=int, default=2, help="link blocks: virtual channels (default 2)")
    p.add_argument("--depth", type=int, default=4, help="link blocks: flits per VC (default 4)")
    p.add_argument("--width", type=int, default=64, help="link blocks: flit bits (default 64)")
    p.add_argument(
        "--arith",
        choices=FORMS,
        default=FORMS[0],
        help="form of the datapath's arithmetic, equal bit for bit: gates (what synthesis "
        "measures, default) or words (quicker to simulate); hdl/arith.py",
    )
    p.add_argument("--name", default=None, help="top module name (default: the block name)")
    p.add_argument("-o", "--output", required=True, type=Path, help="Verilog file to write")
    p.add_argument("--json", action="store_true", help="print figures as JSON")
    return p


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    params = {"rows": args.rows, "cols": args.cols, "fmt": args.fmt}
    if args.block in LINK_BLOCKS:
        params = {"shape": args.shape, "vcs": args.vcs, "depth": args.depth, "width": args.width}
    try:
        if "fmt" in params:
            for name in [] if args.fmt == "all" else args.fmt.split(","):
                if name.strip() in MX_FORMATS:
                    raise ValueError(
                        f"--format {name.strip()} is an MX format, which the RTL tensor engine "
                        f"does not have (docs/tensor_engine.md); allowed: "
                        f"{', '.join(PE_FORMATS)} or 'all'"
                    )
                if name.strip():
                    get_format(name.strip(), PE_FORMATS)
            params["fmt"] = ",".join(f.name for f in format_set(args.fmt))
        info = write_verilog(args.block, params, args.output, name=args.name, arith=args.arith)
    except (ValueError, TypeError) as error:
        print(f"python -m hdl: error: {error}", file=sys.stderr)
        return 2
    info["output"] = str(args.output)
    if args.json:
        print(json.dumps(info))
    else:
        print(
            f"{args.output}: {args.block} {params}, {info['bytes'] / 1e6:.2f} MB "
            f"in {info['seconds']:.2f} s"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
