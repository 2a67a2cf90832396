"""``make mutate`` / ``python -m verif.mutate``: grade the benches by mutation; one line per
mutant, a table per target, ``build/mutate/mutate.json`` and ``mutate.md``.

Exit 0 when every mutant is killed or proven equivalent and the identity survives, 1
otherwise, 2 on a bad argument (the message names the ``make`` variable).

Examples::

    python -m verif.mutate
    python -m verif.mutate --target router_4x4 --mutants 10 --seed 7
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

from verif.common.runner import BUILD, SIMULATORS

from . import yosys
from .grade import SIM_TIMEOUT_S, grade
from .report import markdown, summary
from .survivors import cells, load, unmatched, unmatched_line
from .targets import TARGETS

OUT = BUILD / "mutate"

#: Command-line flag -> the ``make mutate`` variable that sets it (named in every error).
MAKE_VARIABLES = {
    "--target": "MUTATE_TARGETS",
    "--mutants": "MUTANTS",
    "--seed": "MUTATE_SEED",
    "--sim": "SIM",
    "--sim-timeout": "MUTATE_SIM_TIMEOUT",
}
MAX_MUTANTS = 1000


def _fail(flag: str, value, allowed: str):
    print(
        f"error: {MAKE_VARIABLES[flag]} (--{flag.lstrip('-')}) must be {allowed}, not {value!r}",
        file=sys.stderr,
    )
    sys.exit(2)


def _seconds(flag: str, value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds > 0):
        _fail(flag, value, "a finite number of seconds > 0")
    return seconds


def _count(flag: str, value: str, low: int, high: int) -> int:
    if not value.isdigit() or not low <= int(value) <= high:
        _fail(flag, value, f"an integer in {low}..{high}")
    return int(value)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m verif.mutate", description=__doc__)
    parser.add_argument("--target", default=",".join(TARGETS), help=f"of {', '.join(TARGETS)}")
    parser.add_argument("--mutants", default="30", help="mutations per target (default 30)")
    parser.add_argument("--seed", default="1", help="seed of Yosys's sampling (default 1)")
    parser.add_argument("--sim", default="icarus", help=f"one of {', '.join(SIMULATORS)}")
    parser.add_argument("--equiv-timeout", type=float, default=60.0, help="per survivor, s")
    parser.add_argument(
        "--sim-timeout",
        default=str(SIM_TIMEOUT_S),
        help=f"per bench run on a mutant, s: past it the mutant counts as hanging the "
        f"simulation, a kill (default {SIM_TIMEOUT_S:g})",
    )
    parser.add_argument("--out", default=str(OUT), help="folder for the mutants and reports")
    args = parser.parse_args(argv)
    names = [n for n in args.target.split(",") if n]
    for name in names or [args.target]:
        if name not in TARGETS:
            _fail("--target", name, f"a comma list of {', '.join(TARGETS)}")
    count = _count("--mutants", args.mutants, 1, MAX_MUTANTS)
    seed = _count("--seed", args.seed, 0, 2**31 - 1)
    if args.sim not in SIMULATORS:
        _fail("--sim", args.sim, f"one of {', '.join(SIMULATORS)}")
    sim_timeout = _seconds("--sim-timeout", args.sim_timeout)

    classified = load()
    out = Path(args.out)
    report = {"mutants": count, "seed": seed, "sim": args.sim, "targets": {}}
    dead = {}  # target -> survivors.toml entries this run shows dead
    start = time.perf_counter()
    for name in names:
        target = TARGETS[name]
        folder = out / name
        design = yosys.prepare(target.verilog(), target.top, folder)
        mutations = yosys.sample(design, count, seed)
        print(f"[mutate] {name}: {len(mutations)} mutations (seed {seed}) of {target.top}")
        target_start = time.perf_counter()
        mutants = grade(
            target,
            mutations,
            args.sim,
            folder,
            equiv_timeout_s=args.equiv_timeout,
            sim_timeout_s=sim_timeout,
            classified=classified,
            progress=lambda m: print(f"  m{m.id:03d} {_line(m)}", flush=True),
        )
        dead[name] = unmatched(classified, name, mutants, cells(design))
        report["targets"][name] = {
            "block": target.block,
            "config": target.cfg.tag,
            "benches": [b.name for b in target.benches],
            "seconds": round(time.perf_counter() - target_start, 1),
            "summary": summary(mutants),
            "mutants": [m.as_dict() for m in mutants],
            "dead_survivors": [{"mutation": m, "why": why} for m, why in dead[name]],
        }
    report["seconds"] = round(time.perf_counter() - start, 1)
    out.mkdir(parents=True, exist_ok=True)
    (out / "mutate.json").write_text(json.dumps(report, indent=1, default=str))
    text = markdown(report)
    (out / "mutate.md").write_text(text)
    print(text)
    line = unmatched_line(dead)
    if line is not None:
        print(line)
    print(f"[mutate] {out / 'mutate.json'}, {out / 'mutate.md'} ({report['seconds']} s)")
    bad = [s for t in report["targets"].values() for s in [t["summary"]]]
    return 0 if all(s["survived"] == 0 and s["identity_ok"] for s in bad) else 1


def _line(m) -> str:
    if m.kills:
        k = m.kills[0]
        where = f"cycle {k.cycle}" if k.cycle is not None else "at the end"
        what = f"killed by {k.bench} seed {k.seed} {where}"
    elif m.classified:
        what = f"{m.status} (classified: verif/mutate/survivors.toml)"
    else:
        what = m.status + (f" (cut check: {m.equivalence['verdict']})" if m.equivalence else "")
    return f"{what:<52} {m.seconds:5.1f} s  {m.mutation[13:90]}"


if __name__ == "__main__":
    sys.exit(main())
