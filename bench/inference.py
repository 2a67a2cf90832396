"""``python -m bench --only infer``: what a user of the inference model waits for.

* **whole commands**, each in fresh processes, start-up and imports included (the median of
  :data:`COMMAND_REPEATS`): ``python -c "import numpy, pydantic"`` (the baseline: what any
  command of this stack pays), ``trnsim --help`` (target <= 2x the baseline) and ``trnsim
  infer`` for Llama 3.1 405B on a trn2 server (target <= 3x the baseline);
* the **first estimate** of a fresh interpreter, imports apart, on :data:`COLD` (six layouts:
  dense and MoE, trn2 server, UltraServer and H100): hardware, model and preset files parsed,
  operator costs and the network's collective closed forms worked out;
* the first call on a **new layout** in a process that has run one estimate, the **steady
  state** (the best of 50 calls on the issue's layout: Llama 3.1 405B BF16, trn2 server TP 16,
  2048/256, batch 1; every call prices the prefill and all 256 decode steps again), and the
  first call on the UltraServer (TP 64: its network's closed forms);
* ``trnsim infer-search`` over >= 10,000 configurations, in process and on local Dask;
* ``trnsim validate --suite inference``: the command's wall time, and ``validate_inference()``
  alone after the imports in a fresh interpreter.

Measured and printed, never asserted.
"""

from __future__ import annotations

import compileall
import json
import statistics
import subprocess
import sys
import time

from .common import ROOT, best_time

__all__ = ["bench_inference"]

#: The issue's ``trnsim infer`` example.
ISSUE = dict(
    model="llama3.1-405b", hardware="trn2", system="server", tp=16, prompt=2048, output=256
)
#: Layouts not built before in the process, each timed on its first call.
NEW_LAYOUTS = (
    dict(fmt="fp8"),
    dict(kv_fmt="fp8"),
    dict(tp=8, fmt="fp8"),
    dict(system="2xserver", pp=2),
)
#: Layouts of the first-estimate figure.
COLD = (
    dict(model="llama3.1-405b", hardware="trn2", system="server", tp=16),
    dict(model="llama3-8b", hardware="trn2", system="server", tp=4, batch=8),
    dict(model="llama3.3-70b", hardware="trn2", system="ultraserver", tp=64),
    dict(model="mixtral-8x7b", hardware="trn2", system="server", tp=8, ep=8, batch=16),
    dict(model="deepseek-v3", hardware="trn2", system="ultraserver", tp=64, ep=64, fmt="fp8"),
    dict(model="llama3.3-70b", hardware="h100", system="server", tp=8),
)
#: Fresh processes per whole command (the median is kept: the machine is shared).
COMMAND_REPEATS = 7
#: Whole commands timed (what, ``python`` arguments, the multiple of the baseline to stay in).
COMMANDS = (
    ("python -c 'import numpy, pydantic' (the baseline)", ["-c", "import numpy, pydantic"], None),
    ("trnsim --help", ["-m", "tlm", "--help"], 2.0),
    (
        "trnsim infer --model llama3.1-405b (trn2 server, TP 16)",
        ["-m", "tlm", "infer", "--model", "llama3.1-405b"],
        3.0,
    ),
)

_COLD = """
import json, sys, time
start = time.perf_counter()
from tlm.inference import estimate
imported = time.perf_counter() - start
args = json.loads(sys.argv[1])
start = time.perf_counter()
r = estimate(**args)
first = time.perf_counter() - start
print(json.dumps({"import_s": imported, "first_s": first, "ttft_s": r.ttft_s}))
"""

_VALIDATE = """
import json, time
start = time.perf_counter()
from tlm.validation.inference import validate_inference
imported = time.perf_counter() - start
start = time.perf_counter()
v = validate_inference()
took = time.perf_counter() - start
print(json.dumps({"import_s": imported, "validate_s": took, "rows": len(v.rows),
                  "skipped": len(v.skipped)}))
"""


def _child(code: str, *args: str) -> dict:
    """Run ``code`` in a fresh interpreter at the repository's root; its last line's JSON."""
    result = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=ROOT, check=False
    )
    if result.returncode:
        raise RuntimeError(f"bench child failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def _command_s(argv: list[str]) -> float:
    """The median wall time of ``python ARGV`` in :data:`COMMAND_REPEATS` fresh processes."""
    times = []
    for _ in range(COMMAND_REPEATS):
        start = time.perf_counter()
        subprocess.run([sys.executable, *argv], capture_output=True, cwd=ROOT, check=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _commands() -> list[dict]:
    """Whole commands against the baseline (:data:`COMMANDS`), the package's bytecode brought
    up to date first, as installing it does: where Python may not write bytecode
    (``PYTHONDONTWRITEBYTECODE``), a module edited since its ``.pyc`` would be compiled again
    in every process timed, and the figure would measure the compiler."""
    compileall.compile_dir(ROOT / "tlm", quiet=1)
    rows, baseline = [], None
    for what, argv, within in COMMANDS:
        took = _command_s(argv)
        baseline = took if baseline is None else baseline
        ratio = f" ({took / baseline:.1f}x the baseline)" if within else ""
        rows.append(
            {
                "figure": f"{what}: whole command, fresh process, median of "
                f"{COMMAND_REPEATS}{ratio}",
                "value": took,
                "unit": "s",
                "target": f"<= {within:g}x the baseline" if within else "",
                "naive": "",
            }
        )
    return rows


def _estimate(**change):
    from tlm.inference import estimate

    args = {**ISSUE, **change}
    return estimate(args.pop("model"), args.pop("hardware"), args.pop("system"), batch=1, **args)


#: The search the issue's target is about: >= 10,000 configurations (Llama 3.1 405B and Mixtral
#: 8x7B on trn2 servers and UltraServers, every layout, both formats and KV formats, 22
#: batches from 1 to 2,048).
SEARCH_BATCHES = tuple(sorted({int(round(2 ** (i / 2))) for i in range(23)}))


def _search() -> list[dict]:
    """``infer-search`` over >= 10,000 configurations: in this process and on a local Dask
    cluster of two workers (start-up included)."""
    from tlm.inference.search import search

    load = dict(rate_per_s=5.0, prompt=2048, output=256, slo_ttft_s=5.0, slo_tpot_s=0.05)
    rows = []
    for scheduler in ("inline", "local"):
        start = time.perf_counter()
        total = 0
        for model in ("llama3.1-405b", "mixtral-8x7b"):
            found = search(
                model,
                "trn2",
                systems=("server", "ultraserver"),
                batches=SEARCH_BATCHES,
                scheduler=scheduler,
                workers=2 if scheduler == "local" else None,
                **load,
            )
            total += found.evaluated
        took = time.perf_counter() - start
        rows.append(
            {
                "figure": f"trnsim infer-search: {total:,} configurations (Llama 3.1 405B and "
                f"Mixtral 8x7B on trn2, 2 systems, 22 batches), "
                f"{'in process' if scheduler == 'inline' else 'local Dask, 2 workers'}",
                "value": took,
                "unit": "s",
                "target": "<= 30 s",
                "naive": "",
            }
        )
    return rows


def bench_inference() -> list[dict]:
    rows = _commands()
    runs = [_child(_COLD, json.dumps(layout)) for layout in COLD]
    firsts = [r["first_s"] for r in runs]
    imported = sum(r["import_s"] for r in runs) / len(runs)
    rows.append(
        {
            "figure": f"trnsim infer estimate, first call in a fresh interpreter on "
            f"{len(COLD)} layouts (imports apart: {imported:.2f} s): mean (the slowest "
            f"{max(firsts) * 1e3:.0f} ms)",
            "value": sum(firsts) / len(firsts) * 1e3,
            "unit": "ms",
            "target": "",
            "naive": "",
        }
    )
    case = "Llama 3.1 405B BF16, trn2 server TP 16, 2048/256, batch 1"
    _estimate()  # this process's first estimate: the hardware's costs and network built
    firsts = []
    for change in NEW_LAYOUTS:
        start = time.perf_counter()
        _estimate(**change)
        firsts.append(time.perf_counter() - start)
    names = ", ".join(",".join(f"{k}={v}" for k, v in c.items()) for c in NEW_LAYOUTS)
    rows.append(
        {
            "figure": f"... in a process that has run one estimate: first call on a new layout, "
            f"mean of {len(firsts)} ({names}; the slowest {max(firsts) * 1e3:.1f} ms)",
            "value": sum(firsts) / len(firsts) * 1e3,
            "unit": "ms",
            "target": "",
            "naive": "",
        }
    )
    steady = best_time(_estimate, repeat=50)
    rows.append(
        {
            "figure": f"trnsim infer estimate ({case}): steady state, best of 50",
            "value": steady * 1e3,
            "unit": "ms",
            "target": "<= 5 ms",
            "naive": "",
        }
    )
    start = time.perf_counter()
    _estimate(system="ultraserver", tp=64)
    rows.append(
        {
            "figure": "... first call on the trn2 UltraServer, TP 64 (its network's closed "
            "forms built once)",
            "value": (time.perf_counter() - start) * 1e3,
            "unit": "ms",
            "target": "",
            "naive": "",
        }
    )
    rows += _search()
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "tlm", "validate", "--suite", "inference", "--json"],
        capture_output=True,
        cwd=ROOT,
        check=True,
    )
    whole = time.perf_counter() - start
    v = _child(_VALIDATE)
    rows += [
        {
            "figure": f"trnsim validate --suite inference ({v['rows']} rows modelled, "
            f"{v['skipped']} reported not modelled; fits included): the command's wall time",
            "value": whole,
            "unit": "s",
            "target": "",
            "naive": "",
        },
        {
            "figure": "... validate_inference() alone (after the imports)",
            "value": v["validate_s"],
            "unit": "s",
            "target": "",
            "naive": "",
        },
    ]
    return rows


if __name__ == "__main__":
    for row in bench_inference():
        print(f"{row['figure']}: {row['value']:,.3g} {row['unit']}")
