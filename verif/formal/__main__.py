"""``make formal`` / ``python -m verif.formal``: check every property (or those named), one
line each, and write ``build/formal/formal.json``.

Examples::

    python -m verif.formal
    python -m verif.formal --property arbiter_fairness_4x4 --property router_credits
    python -m verif.formal --property router_vc_order --depth 6
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .properties import PROPERTIES

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "build" / "formal"
MAX_DEPTH = 200


def _fail(flag: str, value, allowed: str):
    print(f"error: {flag} must be {allowed}, not {value!r}", file=sys.stderr)
    sys.exit(2)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m verif.formal", description=__doc__)
    parser.add_argument(
        "--property",
        action="append",
        metavar="NAME",
        help=f"check only this one (repeatable): {', '.join(PROPERTIES)}",
    )
    parser.add_argument(
        "--depth", metavar="N", help="induction length or bound in cycles, for every property"
    )
    parser.add_argument("--out", default=str(OUT), help="folder for the runs and formal.json")
    args = parser.parse_args(argv)
    names = args.property or [name for name, p in PROPERTIES.items() if p.default]
    for name in names:
        if name not in PROPERTIES:
            _fail("--property", name, f"one of {', '.join(PROPERTIES)}")
    depth = None
    if args.depth is not None:
        ok = args.depth.isdigit() and 1 <= int(args.depth) <= MAX_DEPTH
        if not ok:
            _fail("--depth", args.depth, f"an integer in 1..{MAX_DEPTH}")
        depth = int(args.depth)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows, failed = [], 0
    for name in names:
        prop = PROPERTIES[name]
        verdict = prop.run(out / name, depth)
        status = "PASS" if verdict.passed else "FAIL"
        failed += not verdict.passed
        if prop.mode == "python":
            result = "proven (exhaustive)" if verdict.passed else "counterexample"
        else:
            result = verdict.result
        reached, total = verdict.covers
        covers = f"covers {reached}/{total}"
        if verdict.timeout == "cover":
            covers = "covers timed out"
        where = f"  {verdict.trace}" if verdict.trace else ""
        print(
            f"{status}  {name:<24} {result:<20} {covers:<12} {verdict.time_s:7.1f} s{where}",
            flush=True,
        )
        rows.append(
            {
                "name": name,
                "status": status,
                "result": result,
                "proven": verdict.proven,
                "mode": prop.mode,
                "depth": verdict.depth,
                "covers_reached": reached,
                "covers_total": total,
                "time_s": round(verdict.time_s, 1),
                "trace": verdict.trace,
                "timeout": verdict.timeout,
                "proves": prop.proves,
            }
        )
    (out / "formal.json").write_text(json.dumps({"properties": rows}, indent=2) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
