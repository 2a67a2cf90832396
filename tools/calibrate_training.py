"""Fit each GPU's GEMM figures on the published training runs and write them into its hardware
file (``make calibrate-training``):

    .venv/bin/python tools/calibrate_training.py            # fit and write
    .venv/bin/python tools/calibrate_training.py --check    # fit, compare, write nothing

For each accelerator of :data:`tlm.validation.training.FIT` (a100, h100) fits the figures of
:data:`tlm.validation.training.PARAMETERS` on its rows marked ``fit`` and writes them into the
``[chip]`` section of ``tlm/hardware/<name>.toml`` (``gemm_efficiency``, ``gemm_call_s``, source
``FITTED``), so ``trnsim train`` as shipped is the model ``trnsim validate`` judges; then
rewrites the table of every run in docs/validation.md ("| run | layout (model) | ...") from the
shipped model and prints every accelerator's errors. Commit the files it writes;
``tests/test_validation.py`` fails when they drift from the fit.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tlm.validation.training import FIT, HARDWARE_FIGURES, fit, validate_training  # noqa: E402
from tools.figures import set_figure  # noqa: E402

HARDWARE = ROOT / "tlm" / "hardware"
DOCS = ROOT / "docs" / "validation.md"
#: The docs' table of runs: its header, and the paragraph that follows it.
TABLE_HEAD = "| run | layout (model) | published | shipped (= calibrated) | error |"
TABLE_END = "\n\n**Assumed where the papers are silent**"
#: How the table names a source.
LABELS = {"NEURON_NXD": "Neuron NxD", "NEURON_NEMO": "Neuron NeMo"}


def _shown(r, x: float) -> str:
    if r.quantity == "step_time_s":
        return f"{x:.2f} s"
    if r.quantity == "sequences_per_s":
        return f"{x:.2f} seq/s"
    return f"{x / 1e12:.0f} TFLOP/s"


def write_docs(text: str, rows) -> str:
    """``text`` (docs/validation.md) with its table of training runs made from ``rows``: the
    calibrated figures, which the files just written ship (this process loaded the hardware
    files before writing them, so its "shipped" column is the files' old values)."""
    lines = [
        TABLE_HEAD + " memory per chip | role |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in sorted(rows, key=lambda r: (r.system, r.section, r.case)):
        d = r.detail
        memory = f"{d.memory_bytes / 2**30:.1f} of {d.hbm_bytes / 2**30:.1f} GiB"
        memory += "" if d.fits else " **(does not fit)**"
        lines.append(
            f"| {LABELS.get(r.source, r.source.capitalize())} {d.model} #{d.run} "
            f"({r.system.upper()}) | "
            f"{d.layout} | {_shown(r, r.published)} | {_shown(r, r.calibrated)} | "
            f"{r.calibrated_error_fraction:+.1%} | {memory} | {r.role} |"
        )
    start, end = text.index(TABLE_HEAD), text.index(TABLE_END)
    return text[:start] + "\n".join(lines) + text[end:]


def write_figures(name: str, fitted: dict) -> list[str]:
    """Set the fitted ``[chip]`` figures of ``tlm/hardware/<name>.toml``, keeping every other
    byte; return the lines changed."""
    path = HARDWARE / f"{name}.toml"
    text = path.read_text()
    changed = []
    for parameter, value in fitted.items():
        figure = HARDWARE_FIGURES[parameter]
        shown = f"{value:.4g}"
        text, ok = set_figure(text, figure, shown, "FITTED")
        if not ok:
            raise SystemExit(
                f"calibrate_training: {path} [chip] has no {figure} line with source FITTED"
            )
        changed.append(f"{name}.chip.{figure} = {shown}")
    path.write_text(text)
    return changed


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="fit and print; write no file")
    args = p.parse_args(argv)
    fits = {name: fit(name) for name in FIT}
    for name, fitted in fits.items():
        print(f"{name}: " + ", ".join(f"{k} {v:.4g}" for k, v in fitted.items()))
    if args.check:
        return 0
    for name, fitted in fits.items():
        for line in write_figures(name, fitted):
            print("wrote", line)
    v = validate_training()
    DOCS.write_text(write_docs(DOCS.read_text(), v.rows))
    print(f"wrote the table of runs in {DOCS.relative_to(ROOT)}")
    for name in sorted({r.system for r in v.rows}):
        for role in ("fit", "judge"):
            errors = [
                abs(r.calibrated_error_fraction)
                for r in v.rows
                if r.system == name and r.role == role
            ]
            if errors:
                print(
                    f"{name} {role}: {len(errors)} rows, mean |error| "
                    f"{sum(errors) / len(errors):.1%}, max {max(errors):.1%}"
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
