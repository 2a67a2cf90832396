"""Fit the Neuron runtime's collective costs of each chip generation and write them into its
preset (``make calibrate-collectives``):

    .venv/bin/python tools/calibrate_collectives.py            # every platform of the data
    .venv/bin/python tools/calibrate_collectives.py --check    # fit, compare, write nothing

For each platform of ``tlm/validation/collectives.toml`` (trn1, trn2), fits the figures of the
preset's ``[collectives]`` whose source is ``FITTED`` on the rows marked ``fit``
(:func:`tlm.validation.collectives.calibrate`) and writes their values into
``tlm/presets/<platform>.toml``; a preset whose figures say they are another platform's
(trn3: trn2's) gets that platform's. Then prints every row's error as shipped. Commit the
presets it writes; ``tests/test_validation_collectives.py`` fails when they drift from the fit.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tlm.collectives.runtime import RUNTIME_FIGURES  # noqa: E402
from tlm.validation.collectives import (  # noqa: E402
    calibrate,
    load_file,
    summary,
    validate,
)
from tools.figures import set_figure  # noqa: E402

#: Presets with no published runs of their own, and the platform whose fit they take.
BORROWED = {"trn3": "trn2"}
PRESETS = ROOT / "tlm" / "presets"


def write_figures(preset: str, costs) -> list[str]:
    """Set the ``[collectives]`` figures of ``tlm/presets/<preset>.toml`` to ``costs``, keeping
    every other byte; return the lines changed."""
    path = PRESETS / f"{preset}.toml"
    text = path.read_text()
    head, found, tail = text.partition("\n[collectives]\n")
    if not found:
        raise SystemExit(f"calibrate_collectives: {path} has no [collectives] section")
    changed = []
    for name in RUNTIME_FIGURES:
        value = f"{getattr(costs, name):.4g}"
        tail, ok = set_figure(tail, name, value)
        if not ok:
            raise SystemExit(f"calibrate_collectives: {path} [collectives] has no {name} line")
        changed.append(f"{preset}.collectives.{name} = {value}")
    path.write_text(head + found + tail)
    return changed


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="fit and print; write no preset")
    args = p.parse_args(argv)
    platforms = sorted({s.platform for s in load_file().section})
    fits = {}
    for platform in platforms:
        fits[platform] = costs = calibrate(platform)
        shown = ", ".join(f"{n} {getattr(costs, n):.4g}" for n in RUNTIME_FIGURES)
        print(f"{platform}: {shown}")
    if args.check:
        return 0
    for preset, platform in [*((p, p) for p in platforms), *BORROWED.items()]:
        for line in write_figures(preset, fits[platform]):
            print("wrote", line)
    for platform, entry in summary(validate()).items():
        for role in ("fit", "judge"):
            n, mean, most = entry[role]
            print(f"{platform} {role}: {n} rows, mean |error| {mean:.1%}, max {most:.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
