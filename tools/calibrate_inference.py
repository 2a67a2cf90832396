"""Fit each system's inference fixed costs on the published TTFT/TPOT rows, write them into
``tlm/inference/data/fixed_costs.toml`` and the row table of docs/validation.md
(``make calibrate-inference``):

    .venv/bin/python tools/calibrate_inference.py            # fit, write both
    .venv/bin/python tools/calibrate_inference.py --check    # fit and print; write nothing

For each system of :data:`tlm.validation.inference.FIT` (h100, trn2) the four named figures of
:class:`tlm.inference.FixedCosts` fitted on its ``fit`` rows
(:func:`tlm.validation.inference.validate_inference`) replace the values of its section, source
``FITTED``, and of the sections that borrow its fit (:data:`BORROWED`, source ``BORROWED``);
every other byte of the file stays. The table of every row in docs/validation.md
("| row | system | case ...") gets its case, published, bare and fitted columns from the same run.
Commit what it writes; ``tests/test_validation_inference.py`` fails when the file drifts from
the fit.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tlm.inference.layout import FIXED_COSTS  # noqa: E402
from tlm.validation.inference import validate_inference  # noqa: E402
from tools.figures import set_figure  # noqa: E402

FILE = ROOT / "tlm" / "inference" / "data" / "fixed_costs.toml"
#: Hardware with no published row of its own, and the system whose fit it borrows (the same
#: software stack): written with source BORROWED.
BORROWED = {"a100": "h100", "trn1": "trn2", "trn3": "trn2", "trn3-gen2": "trn2"}
DOCS = ROOT / "docs" / "validation.md"
#: The quantities that are times (the docs' table shows them in ms or s; the rest in tokens/s).
TIMES = ("ttft_s", "tpot_s", "e2e_s")


def write_costs(system: str, fitted: dict, text: str, source: str = "FITTED") -> str:
    """``text`` (the fixed costs file) with ``[system]``'s figures of ``source`` (FITTED, or
    BORROWED) set to ``fitted``."""
    head, found, tail = text.partition(f"\n[{system}]\n")
    if not found:
        raise SystemExit(f"calibrate_inference: {FILE} has no [{system}] section")
    body, nxt, rest = tail.partition("\n[")
    for name in FIXED_COSTS:
        value = fitted[name]
        shown = f"{value:.4g}" if name == "collective_bandwidth_factor" else f"{value:.4e}"
        if set_figure(body, name, shown, "MECHANISM")[1]:  # held, not fitted
            if value != 1.0:
                raise SystemExit(f"calibrate_inference: [{system}] {name} held at 1, not {value}")
            continue
        body, ok = set_figure(body, name, shown, source)
        if not ok:
            raise SystemExit(f"calibrate_inference: [{system}] has no {source} {name} line")
    return head + found + body + nxt + rest


def _shown(quantity: str, value: float) -> str:
    if quantity not in TIMES:  # throughputs: tokens/s, whole
        return f"{value:,.0f}"
    return f"{value:.3g} s" if value >= 1 else f"{value * 1e3:,.1f} ms"


def write_docs(text: str, rows) -> tuple[str, int]:
    """``text`` (docs/validation.md) with the case and the numeric columns of every row of the
    inference table set from ``rows``; and how many rows it set."""
    by_id = {r.detail.id: r for r in rows}
    done = 0

    def line(m):
        nonlocal done
        cells = m[0].split(" | ")
        r = by_id.get(cells[0].strip("| `"))
        if r is None or len(cells) != 11:
            return m[0]
        # the case carries the run's own figures (its KV cache, limits); the table gives the
        # reliability a column of its own
        cells[2] = r.case.removesuffix(f" ({cells[10].strip(' |')})")
        published_unit = cells[4].split(" ", 1)[1] if " " in cells[4] else ""
        cells[4] = _shown(r.quantity, r.published)
        if r.quantity not in TIMES and published_unit:
            cells[4] += f" {published_unit}"
        cells[5] = _shown(r.quantity, r.detail.bare)
        cells[6] = f"{r.detail.bare / r.published - 1:+.1%}"
        cells[7] = _shown(r.quantity, r.calibrated)
        cells[8] = f"**{r.calibrated_error_fraction:+.1%}**"
        cells[9] = r.role
        done += 1
        return " | ".join(cells)

    return re.sub(r"^\| `[^`]+` \|.*\|$", line, text, flags=re.M), done


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="fit and print; write nothing")
    args = p.parse_args(argv)
    v = validate_inference()
    for system, fitted in v.parameters.items():
        print(f"{system}: " + ", ".join(f"{k} {fitted[k]:.4g}" for k in FIXED_COSTS))
    if args.check:
        return 0
    text = FILE.read_text()
    for system, fitted in v.parameters.items():
        text = write_costs(system, fitted, text)
    for system, lender in BORROWED.items():
        text = write_costs(system, v.parameters[lender], text, "BORROWED")
    FILE.write_text(text)
    docs, n = write_docs(DOCS.read_text(), v.rows)
    DOCS.write_text(docs)
    print(f"wrote {FILE.relative_to(ROOT)} and {n} rows of {DOCS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
