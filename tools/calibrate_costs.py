"""Rebuild the calibrated GEMM costs of a chip preset (``make calibrate``):

    .venv/bin/python tools/calibrate_costs.py                 # trn2, bf16 and fp8 (minutes)
    .venv/bin/python tools/calibrate_costs.py --preset trn2 --formats bf16 --out /tmp/x.json
    .venv/bin/python tools/calibrate_costs.py --check     # estimates against the TLM (~2 min)

Runs the chip TLM's shipped GEMM kernel (timing only) over the grid of
:data:`tlm.costs.grid.AXES` in M, N and K, on all cores and on one, per format, and writes
``tlm/costs/data/<preset>.json``, which :class:`tlm.costs.OpCosts` reads. Run it again when a
change to the chip model makes ``tests/test_costs_cache.py`` fail, and commit the new file.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tlm.costs.calibrate import calibrate, check, write_data  # noqa: E402
from tlm.costs.grid import AXES, FORMATS  # noqa: E402
from tlm.presets import PRESETS  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--preset", default="trn2", choices=PRESETS, help="chip preset (trn2)")
    p.add_argument(
        "--formats",
        default=",".join(FORMATS),
        help=f"comma-separated tables to measure, of {', '.join(FORMATS)}",
    )
    p.add_argument(
        "--max",
        type=int,
        help="largest grid value of M, N and K, a power of two (default: the full grid, "
        + ", ".join(f"{d} {a[-1]}" for d, a in AXES.items())
        + ")",
    )
    p.add_argument("--out", help="output file (default tlm/costs/data/<preset>.json)")
    p.add_argument(
        "--check",
        action="store_true",
        help="do not calibrate: print the shipped calibration's estimates of "
        "tlm.costs.calibrate.CHECK_SHAPES against the chip TLM (a Markdown table)",
    )
    args = p.parse_args(argv)
    if args.check:
        print("| M x N x K | chip TLM | estimate | error | basis |")
        print("|---|---|---|---|---|")
        errors = []
        for r in check(args.preset):
            errors.append(abs(r["error"]))
            print(
                f"| {r['m']} x {r['n']} x {r['k']} | {r['tlm_s'] * 1e6:,.1f} us | "
                f"{r['estimate_s'] * 1e6:,.1f} us | {r['error']:+.1%} | {r['basis']} |",
                flush=True,
            )
        print(f"\nmean |error| {sum(errors) / len(errors):.1%}, max {max(errors):.1%}")
        return 0
    formats = [f for f in args.formats.split(",") if f]
    bad = sorted(set(formats) - set(FORMATS))
    if bad:
        p.error(f"--formats takes {', '.join(FORMATS)}, not {', '.join(bad)}")
    if args.max is not None and args.max not in AXES["n"]:
        p.error(f"--max must be one of {', '.join(map(str, AXES['n']))}, not {args.max}")
    top = args.max or max(AXES["n"])
    axes = {d: [a for a in values if a <= top] for d, values in AXES.items()}
    out = Path(args.out) if args.out else ROOT / "tlm" / "costs" / "data" / f"{args.preset}.json"
    start = time.perf_counter()
    last = [0.0]

    def progress(done, total):
        now = time.perf_counter()
        if now - last[0] > 10 or done == total:
            last[0] = now
            print(f"  {done}/{total} shapes, {now - start:.0f} s", flush=True)

    data = calibrate(args.preset, axes, formats, progress)
    write_data(data, out)
    print(f"wrote {out} ({data['calibration_wall_s']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
