"""The front door fuzzed from outside: bad inputs read off each study's ``--help``, run as a user
runs them (``python -m tools.fuzz_outside``, ``make fuzz-outside``).

`tests/test_front_door_fuzz.py` draws bad values from the studies' declared types, in process.
This tool knows nothing of them: it reads ``trnsim --help`` for the studies and ``trnsim STUDY
--help`` for each option, its metavar and the bracket that says what it allows (``[an integer
in 1..64; default 16]``, ``[a number > 0; ...]``, ``[one of a, b; ...]``, ``[true or false;
...]``), makes the values that text forbids (negative, zero, fractions, huge, NaN, infinities,
empty, words, a bound plus one, unknown choices; missing, empty, binary and folder files;
unwritable outputs) and runs each in a fresh ``trnsim`` process - on the command line
(``flags``) and as the key of a ``--config`` file (``config``: the same values as TOML, and a
list or a table where one value belongs). Each must end with exit 2, one line on stderr naming
the flag, no traceback or warning, nothing on stdout. ``pairs`` gives two options each a value
their help allows (the lowest bound, each choice, each side of a switch), seeded: the run must
end in results (exit 0, JSON on stdout, finite numbers) or in one line naming one of the two.
Every case and problem goes to ``build/fuzz/outside.json``.

    python -m tools.fuzz_outside                      # every study, every case (about 80 min)
    python -m tools.fuzz_outside --sample 200 --seed 3 --studies train,infer --kinds pairs
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
TRNSIM = [sys.executable, "-m", "tlm.studies.cli"]
#: Flags that write files, and flags that are switches or not inputs.
OUTPUTS = ("--out", "--plot", "--trace", "--vcd", "--out-dir")
#: The kinds of case: bad values on the command line, in a config file; pairs of good ones.
KINDS = ("flags", "config", "pairs")
SKIP = ("--help", "--json", "--version", "--runtime", "--no-runtime", "--scheduler")
_OPTION = re.compile(r"^  (--[a-z0-9-]+)(?: ([A-Z_.=]+))?(?:\s{2,}(.*))?$")


def _help(args: list[str]) -> str:
    done = subprocess.run(TRNSIM + args, capture_output=True, text=True, cwd=ROOT, timeout=120)
    return done.stdout


def studies() -> list[str]:
    """The studies ``trnsim --help`` lists."""
    text = _help(["--help"])
    block = text.split("positional arguments:")[1].split("options:")[0]
    return re.findall(r"^    ([a-z][a-z-]+)(?:\s|$)", block, flags=re.M)


def options(study: str) -> list[dict]:
    """Each option of ``trnsim STUDY --help``: flag, metavar and its help text, joined."""
    out, current = [], None
    for line in _help([study, "--help"]).splitlines():
        match = _OPTION.match(line)
        if line.startswith("  -") and not match:  # a switch pair, "--x, --no-x": no value
            current = None
        elif match:
            current = {"flag": match[1], "metavar": match[2], "help": match[3] or ""}
            out.append(current)
        elif current is not None and line.startswith("      ") and line.strip():
            current["help"] += " " + line.strip()
        elif not line.strip() or not line.startswith(" "):
            current = None
    return [o for o in out if o["metavar"] and o["flag"] not in SKIP]


def _bracket(text: str) -> str:
    """The last ``[...]`` of a help text: what the option allows and its default."""
    found = re.findall(r"\[([^\[\]]*)\]", text)
    return found[-1] if found else ""


def _bounds(allowed: str):
    m = re.search(r"in (-?[\d.e+]+)\.\.(-?[\d.e+]+)", allowed)
    if m:
        return float(m[1]), float(m[2]), True
    m = re.search(r"(>=?) (-?[\d.e+]+)", allowed)
    if m:
        return float(m[2]), None, m[1] == ">="
    return None, None, True


def bad_values(option: dict, files: dict) -> list[str]:
    """Values the option's own help text rules out."""
    flag, allowed = option["flag"], _bracket(option["help"]).split(";")[0]
    if flag in OUTPUTS:
        return ["/nonexistent-dir/x.json", "", "/proc/version/x.json"]
    if option["metavar"] == "FILE" or "path" in allowed and "one of" not in allowed:
        empty = [] if flag == "--config" else [files["empty"]]  # an empty config: no inputs
        return [files["missing"], *empty, files["binary"], files["folder"]]
    values = ["", "   "]
    if allowed.startswith("one of") or "one of" in allowed:
        return values + ["bogus-value", "NONE", "1e9"]
    if allowed.startswith("true or false"):
        return values + ["maybe", "2"]
    if "integer" in allowed or "number" in allowed:
        lo, hi, closed = _bounds(allowed)
        values += ["abc", "1e999", "nan"]
        if "integer" in allowed and flag != "--seed":  # any seed >= 0 is one; a huge finite
            values.append("99999999999999999999999")  # number is a number > 0
        if "inf" not in option["help"]:
            values += ["inf", "-inf"]
        if lo is not None:
            values.append(str(lo - 1) if "integer" in allowed else f"{lo - abs(lo) - 1:g}")
            if not closed:
                values.append(f"{lo:g}")
        if hi is not None:
            values.append(f"{int(hi) + 1}" if "integer" in allowed else f"{hi * 10 + 1:g}")
        if "integer" in allowed:
            values.append("1.5")
        return values
    return values + ["\t", "-1", "%%%"]


def _toml(value: str) -> str:
    """A bad value as a TOML config would hold it: a number, inf or nan as themselves, any
    other text as a string."""
    try:
        tomllib.loads(f"x = {value}")
    except tomllib.TOMLDecodeError:
        return json.dumps(value)
    return value if value.strip() else json.dumps(value)


def config_values(option: dict, files: dict) -> list[str]:
    """The option's bad values as TOML (:func:`_toml`), and a list and a table in its place;
    files and outputs are left to :func:`bad_values` on the command line."""
    if option["flag"] in OUTPUTS or option["flag"] == "--config":
        return []
    if option["metavar"] == "FILE":
        return []
    wrong = ["{ a = 1 }"] + ([] if "list" in _bracket(option["help"]) else ["[1, 2]"])
    return [_toml(v) for v in bad_values(option, files)] + wrong


def good_values(option: dict) -> list[str]:
    """Values the option's help allows and that run quickly: each choice, each switch side, the
    lowest bound of a number (its default's neighbourhood is the studies' own tests')."""
    allowed = _bracket(option["help"]).split(";")[0]
    if option["flag"] in OUTPUTS or option["metavar"] == "FILE" or "path" in allowed:
        return []
    if "one of" in allowed:
        return [c.strip() for c in allowed.split("one of", 1)[1].split(",") if c.strip()][:6]
    if allowed.startswith("true or false"):
        return ["true", "false"]
    lo, _, closed = _bounds(allowed)
    if lo is not None and ("integer" in allowed or "number" in allowed):
        if "integer" in allowed:
            return [str(int(lo) if closed else int(lo) + 1)]
        return [f"{lo:g}" if closed else f"{lo + max(abs(lo), 1e-3) * 1e-3:g}"]
    return []


def pair_cases(study: str, opts: list[dict], n: int, rng) -> list[dict]:
    """``n`` pairs of two options of ``study``, each a value its help allows."""
    good = [(o["flag"], v) for o in opts for v in good_values(o)]
    out = []
    for _ in range(n if len(good) > 1 else 0):
        i, j = rng.choice(len(good), 2, replace=False)
        (f1, v1), (f2, v2) = good[i], good[j]
        if f1 != f2:
            out.append({"study": study, "kind": "pairs", "flag": f1, "value": v1, "pair": [f2, v2]})
    return out


def _make_files(folder: Path) -> dict:
    (folder / "empty.toml").write_text("")
    (folder / "binary.toml").write_bytes(bytes(range(256)) * 4)
    (folder / "dir.toml").mkdir(exist_ok=True)
    return {
        "missing": str(folder / "missing.toml"),
        "empty": str(folder / "empty.toml"),
        "binary": str(folder / "binary.toml"),
        "folder": str(folder / "dir.toml"),
    }


def judge(flag: str, done) -> str:
    """What is wrong with one run's ending ("" when it is as promised)."""
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    if "Traceback" in done.stderr:
        return "traceback"
    if done.returncode != 2:
        return f"exit {done.returncode}"
    if len(lines) != 1:
        return f"{len(lines)} stderr lines"
    if "warning" in done.stderr.lower():
        return "a warning"
    if flag not in lines[0]:
        return "the error does not name the flag"
    if done.stdout.strip():
        return "output on stdout"
    return ""


def judge_pair(flags: list[str], done) -> str:
    """What is wrong with a run of two allowed values: it must give results or refuse them in
    one line naming one of the two flags."""
    if "Traceback" in done.stderr:
        return "traceback"
    if done.returncode == 2:
        lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
        if len(lines) != 1:
            return f"{len(lines)} stderr lines"
        return "" if any(f in lines[0] for f in flags) else "the error names neither flag"
    if done.returncode != 0:
        return f"exit {done.returncode}"
    if "warning" in done.stderr.lower():
        return "a warning"
    try:
        json.loads(done.stdout, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
    except ValueError as error:
        return f"not JSON of finite numbers ({str(error)[:60]})"
    return ""


def run_case(case: dict, timeout: float, folder: Path) -> dict:
    kind = case.get("kind", "flags")
    if kind == "config":
        path = folder / f"case{id(case)}.toml"
        key = case["flag"].removeprefix("--").replace("-", "_")
        path.write_text(f"{key} = {case['value']}\n")
        args = [case["study"], "--config", str(path)]
    elif kind == "pairs":
        args = [case["study"], f"{case['flag']}={case['value']}"]
        args += [f"{case['pair'][0]}={case['pair'][1]}", "--json"]
    else:
        args = [case["study"], f"{case['flag']}={case['value']}"]
    start = time.perf_counter()
    try:
        done = subprocess.run(
            TRNSIM + args, capture_output=True, text=True, cwd=ROOT, timeout=timeout,
            env={**os.environ, "PYTHONWARNINGS": "default"},
        )  # fmt: skip
        if kind == "pairs":
            problem = judge_pair([case["flag"], case["pair"][0]], done)
        else:
            problem = judge(case["flag"], done)
        tail = done.stderr.strip().splitlines()[-1:] if done.stderr.strip() else []
    except subprocess.TimeoutExpired:
        problem, tail = f"still running after {timeout:g} s", []
    return {**case, "problem": problem, "stderr": tail, "seconds": time.perf_counter() - start}


def main(argv=None) -> int:
    doc = __doc__.split("\n")[0]
    p = argparse.ArgumentParser(prog="python -m tools.fuzz_outside", description=doc)
    p.add_argument("--studies", default="", help="comma-separated studies (default: every one)")
    p.add_argument("--sample", type=int, default=0, help="run this many cases, drawn (0: all)")
    p.add_argument("--seed", type=int, default=0, help="seed of the sample's draw")
    p.add_argument("--jobs", type=int, default=2, help="trnsim processes at once")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds a case may run")
    p.add_argument("--out", default=str(ROOT / "build" / "fuzz" / "outside.json"))
    p.add_argument("--kinds", default=",".join(KINDS), help=f"of {', '.join(KINDS)}")
    p.add_argument("--pairs", type=int, default=20, help="pairs of allowed values a study")
    args = p.parse_args(argv)
    names = studies()
    wanted = [s for s in args.studies.split(",") if s] or names
    unknown = sorted(set(wanted) - set(names))
    if unknown:
        p.error(f"--studies: {', '.join(unknown)} not among {', '.join(names)}")
    kinds = [k for k in args.kinds.split(",") if k]
    if not kinds or set(kinds) - set(KINDS):
        p.error(f"--kinds: {args.kinds!r}; allowed: a comma-separated list of {', '.join(KINDS)}")
    rng = np.random.default_rng(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        files = _make_files(Path(tmp))
        cases = []
        for s in wanted:
            opts = options(s)
            if "flags" in kinds:
                cases += [
                    {"study": s, "flag": o["flag"], "value": v}
                    for o in opts
                    for v in bad_values(o, files)
                ]
            if "config" in kinds:
                cases += [
                    {"study": s, "kind": "config", "flag": o["flag"], "value": v}
                    for o in opts
                    for v in config_values(o, files)
                ]
            if "pairs" in kinds:
                cases += pair_cases(s, opts, args.pairs, rng)
        if args.sample and args.sample < len(cases):
            cases = [cases[i] for i in sorted(rng.choice(len(cases), args.sample, replace=False))]
        print(f"fuzz from outside: {len(cases)} cases over {len(wanted)} studies, seed {args.seed}")
        with ThreadPoolExecutor(args.jobs) as pool:
            results = list(pool.map(lambda c: run_case(c, args.timeout, Path(tmp)), cases))
    problems = [r for r in results if r["problem"]]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    summary = {"cases": len(results), "problems": len(problems), "seed": args.seed}
    out.write_text(json.dumps({**summary, "results": results}, indent=1))
    for r in problems:
        how = {"config": " (config)", "pairs": f" with {r.get('pair')}"}.get(r.get("kind"), "")
        print(f"  {r['study']} {r['flag']}={r['value']!r}{how}: {r['problem']} {r['stderr']}")
    total = sum(r["seconds"] for r in results)
    print(f"{len(problems)} problems in {len(results)} cases ({total / 60:.1f} min of runs); {out}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
