"""Draw the bus-bandwidth figures of docs/collectives.md: all-reduce on the trn2 server and the
trn2 UltraServer, 8 B .. 4 GiB, one curve per algorithm that fits and one for ``auto``, on the
flow engine, one rank a chip on the links alone (``--no-runtime``: what the algorithms make of
the torus) - each curve a ``trnsim collective`` run (the Python API), drawn by the study's own
plotting function.

    .venv/bin/python tools/collective_figures.py [--engine flow] [--out docs]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tlm.collectives import ALGORITHMS, unfit
from tlm.studies import run_study
from tlm.studies.collective import plot_series
from tlm.system import load_system

SYSTEMS = {"server": "trn2-server", "ultraserver": "trn2-ultraserver"}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", default="flow", choices=("analytic", "flow"))
    parser.add_argument("--sizes", default="8B..4GiB")
    parser.add_argument("--out", default="docs", help="folder for the PNGs")
    args = parser.parse_args(argv)
    for kind, name in SYSTEMS.items():
        system = load_system(name)
        algos = [a for a in ALGORITHMS if unfit(a, "all_reduce", system) is None]
        runs = []
        for algo in [*algos, "auto"]:
            report = run_study(
                "collective",
                system=kind,
                sizes=args.sizes,
                algo=algo,
                engine=args.engine,
                runtime=False,
            )
            runs.append((algo, report.results.series))
        path = Path(args.out) / f"collectives_busbw_{kind}.png"
        title = f"all_reduce of bf16 on {name} ({args.engine} engine)"
        print(plot_series(runs, title, path))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
