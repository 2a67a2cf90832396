"""``python -m verif.coverage`` (``make coverage``): merge the runs in ``build/coverage/runs/``,
report per testplan feature and per coverage item; write ``build/coverage/coverage.json`` and
``build/coverage/coverage.md`` (with the code coverage of ``code.json`` beside them, if
measured, as the ``code`` field). Exit 1 when a feature is not fully covered with ``--strict``.

Example::

    python -m verif.coverage --runs build/coverage/runs --out build/coverage
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .db import fraction, load_runs, merge, runs_dir
from .testplan import TESTPLAN, expected_items, load

__all__ = ["report", "main"]


def report(runs: list[dict], features) -> dict:
    """Coverage per item (bins, hits, ``covered_fraction``) and per feature, from ``runs``."""
    merged = merge(runs)
    items = {}
    for name, bins in expected_items().items():
        hits = {b: 0 for b in bins} | merged.get(name, {})
        items[name] = {"bins": hits, "covered_fraction": round(fraction(hits), 4)}
    for name, hits in merged.items():  # items of configurations beyond the reference ones
        if name not in items:
            items[name] = {"bins": hits, "covered_fraction": round(fraction(hits), 4)}
    out_features = {}
    for f in features:
        bins = f.bins()
        missing = [f"{i}:{b}" for i, b in bins if not items[i]["bins"].get(b)]
        out_features[f.id] = {
            "description": f.description,
            "tests": list(f.tests),
            "coverage": list(f.coverage),
            "bins": len(bins),
            "hit": len(bins) - len(missing),
            "covered_fraction": round((len(bins) - len(missing)) / len(bins), 4),
            "missing": missing,
        }
    seeds = sorted({r["meta"].get("seed") for r in runs if r["meta"].get("seed") is not None})
    return {"runs": len(runs), "seeds": seeds, "features": out_features, "items": items}


def table(result: dict) -> str:
    """The features as a fixed-width table, then the items."""
    lines = [f"{'feature':34} {'bins':>5} {'hit':>5} {'covered':>8}  missing"]
    for fid, f in result["features"].items():
        missing = ", ".join(f["missing"][:3]) + (" ..." if len(f["missing"]) > 3 else "")
        lines.append(
            f"{fid:34} {f['bins']:5} {f['hit']:5} {f['covered_fraction']:8.2f}  {missing or '-'}"
        )
    lines += ["", f"{'item':34} {'bins':>5} {'hit':>5} {'covered':>8}"]
    for name, item in sorted(result["items"].items()):
        hit = sum(1 for h in item["bins"].values() if h)
        lines.append(f"{name:34} {len(item['bins']):5} {hit:5} {item['covered_fraction']:8.2f}")
    return "\n".join(lines)


def markdown(result: dict) -> str:
    lines = [
        "# Functional coverage",
        "",
        f"{result['runs']} bench runs merged (seeds {', '.join(map(str, result['seeds']))}).",
        "",
        "| feature | bins | hit | covered | missing |",
        "|---|---|---|---|---|",
    ]
    for fid, f in result["features"].items():
        missing = ", ".join(f"`{m}`" for m in f["missing"]) or "-"
        lines.append(
            f"| `{fid}` | {f['bins']} | {f['hit']} | {f['covered_fraction']:.2f} | {missing} |"
        )
    lines += ["", "| item | bins | hit | covered |", "|---|---|---|---|"]
    for name, item in sorted(result["items"].items()):
        hit = sum(1 for h in item["bins"].values() if h)
        lines.append(f"| `{name}` | {len(item['bins'])} | {hit} | {item['covered_fraction']:.2f} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m verif.coverage", description=__doc__)
    p.add_argument("--runs", type=Path, default=None, help="folder of run files")
    p.add_argument("--testplan", type=Path, default=TESTPLAN)
    p.add_argument("--out", type=Path, default=None, help="default build/coverage")
    p.add_argument("--strict", action="store_true", help="exit 1 unless every feature is 1.0")
    args = p.parse_args(argv)
    folder = args.runs or runs_dir()
    runs = load_runs(folder)
    if not runs:
        print(f"no coverage runs in {folder}: run `make coverage` (or make test)", file=sys.stderr)
        return 2
    result = report(runs, load(args.testplan))
    out = args.out or folder.parent
    code = out / "code.json"  # code coverage (python -m verif.coverage.code), when measured
    if code.exists():
        result["code"] = json.loads(code.read_text())["targets"]
    out.mkdir(parents=True, exist_ok=True)
    (out / "coverage.json").write_text(json.dumps(result, indent=1))
    (out / "coverage.md").write_text(markdown(result))
    print(table(result))
    print(f"\n{result['runs']} runs; {out / 'coverage.json'}, {out / 'coverage.md'}")
    full = all(f["covered_fraction"] == 1.0 for f in result["features"].values())
    return 1 if args.strict and not full else 0
