"""Fit each GPU's GEMM figures on the published training runs and write them into its hardware
file (``make calibrate-training``):

    .venv/bin/python tools/calibrate_training.py            # fit and write
    .venv/bin/python tools/calibrate_training.py --check    # fit, compare, write nothing

For each accelerator of :data:`tlm.validation.training.FIT` (a100, h100) fits the figures of
:data:`tlm.validation.training.PARAMETERS` on its rows marked ``fit`` and writes them into the
``[chip]`` section of ``tlm/hardware/<name>.toml`` (``gemm_efficiency``, ``gemm_call_s``, source
``FITTED``), so ``trnsim train`` as shipped is the model ``trnsim validate`` judges. Then prints
every accelerator's errors as shipped. Commit the files it writes; ``tests/test_validation.py``
fails when they drift from the fit.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tlm.validation.training import FIT, HARDWARE_FIGURES, fit, validate_training  # noqa: E402

HARDWARE = ROOT / "tlm" / "hardware"


def write_figures(name: str, fitted: dict) -> list[str]:
    """Set the fitted ``[chip]`` figures of ``tlm/hardware/<name>.toml``, keeping every other
    byte; return the lines changed."""
    path = HARDWARE / f"{name}.toml"
    text = path.read_text()
    changed = []
    for parameter, value in fitted.items():
        figure = HARDWARE_FIGURES[parameter]
        pattern = re.compile(rf"^({figure} = {{ value = )([^,]+)(, source = \"FITTED\".*)$", re.M)
        shown = f"{value:.4g}"
        text, n = pattern.subn(lambda m, v=shown: m[1] + v + m[3], text, count=1)
        if n != 1:
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
    for name in FIT:
        for role in ("fit", "judge"):
            errors = [
                abs(r.shipped_error_fraction) for r in v.rows if r.system == name and r.role == role
            ]
            if errors:
                print(
                    f"{name} {role}: {len(errors)} rows, mean |error| "
                    f"{sum(errors) / len(errors):.1%}, max {max(errors):.1%}"
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
