"""``python -m verif.coverage.code`` (``make coverage-code``): build each target of
:data:`~.targets.TARGETS` with Verilator coverage, run the regression's benches on it, and
report line, branch and toggle coverage per block against the Amaranth source lines: a table,
``build/coverage/code.json`` and ``code.md``, and the ``code`` field of
``build/coverage/coverage.json``. Exit 1 if a bench failed.

Example::

    python -m verif.coverage.code --target router_4x4 --seeds 1,2
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from verif.common.runner import BUILD

from .measure import measure
from .report import markdown, table
from .targets import TARGETS


def _seeds(text: str) -> tuple[int, ...]:
    try:
        seeds = tuple(int(s) for s in text.replace(",", " ").split())
    except ValueError:
        seeds = ()
    if not seeds:
        raise argparse.ArgumentTypeError(f"seeds must be whole numbers, not {text!r}")
    return seeds


def _targets(text: str) -> list[str]:
    names = [n for n in text.split(",") if n]
    bad = [n for n in names if n not in TARGETS]
    if bad or not names:
        raise argparse.ArgumentTypeError(
            f"target must be among {', '.join(TARGETS)}, not {', '.join(bad) or repr(text)}"
        )
    return names


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m verif.coverage.code", description=__doc__)
    p.add_argument("--target", type=_targets, default=list(TARGETS),
                   help=f"comma-separated, default all: {', '.join(TARGETS)}")  # fmt: skip
    p.add_argument("--seeds", type=_seeds, default=(1,), help="seeds each bench runs with")
    p.add_argument("--out", type=Path, default=BUILD / "coverage", help="default build/coverage")
    args = p.parse_args(argv)
    start = time.perf_counter()
    results = {}
    for name in args.target:
        print(f"[coverage-code] {name}: build and {len(TARGETS[name].benches)} benches", flush=True)
        results[name] = measure(TARGETS[name], args.seeds, args.out / "code" / name)
    seconds = time.perf_counter() - start
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "code.json").write_text(
        json.dumps(
            {"seeds": list(args.seeds), "seconds": round(seconds, 1), "targets": results}, indent=1
        )  # fmt: skip
    )
    (args.out / "code.md").write_text(markdown(results, seeds=args.seeds, seconds=seconds))
    functional = args.out / "coverage.json"
    if functional.exists():
        merged = json.loads(functional.read_text()) | {"code": results}
        functional.write_text(json.dumps(merged, indent=1))
    print(table(results))
    failures = [f for r in results.values() for f in r["failures"]]
    for failure in failures:
        print(f"FAILED {failure}", file=sys.stderr)
    print(f"\n{seconds:.0f} s; {args.out / 'code.json'}, {args.out / 'code.md'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
