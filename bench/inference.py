"""``python -m bench --only infer``: the speed of one inference estimate and of the inference
validation.

* one ``trnsim infer`` estimate - :func:`tlm.inference.estimate` of Llama 3.1 405B in BF16 on a
  trn2 server (16 chips, TP 16), a prompt of 2,048 and 256 output tokens, batch 1 - against
  the issue's target (<= 5 ms):

  - **cold**: the first estimate in a fresh interpreter (imports timed apart): what one
    ``trnsim infer`` command pays once - the model and hardware files read, the operator costs
    and the server's network built, the engine's operator tables;
  - **new layout**: the first call on each of four layouts not built before in a process that
    has already run one estimate (FP8 weights, FP8 KV cache, TP 8 in FP8, TP 16 x PP 2 on two
    servers): what a study or a search pays per new engine (the hardware's costs and network
    are kept, the engine's tables are not);
  - **steady state**: the best of 50 calls on the issue's layout (the engine kept, its
    result not: every call prices the prefill and all 256 decode steps again);
  - the first call on the UltraServer (64 chips, TP 64), which builds its network's closed
    forms once;

* ``trnsim validate --suite inference`` (``python -m tlm``): the fit of the two fixed costs
  and the collective bandwidth factor per system (each fit row evaluated at every factor of the
  grid) and every modelled row, the command's wall time (start-up and imports included); and
  ``validate_inference()`` alone, after the imports, in a fresh interpreter.

Fresh interpreters because the estimate's tables and the validation's evaluations are kept for
the process's life (``Engine.build``'s cache, ``lru_cache``): a second run in one process would
time the caches. Measured and printed, never asserted.
"""

from __future__ import annotations

import json
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

_COLD = """
import json, time
start = time.perf_counter()
from tlm.inference import estimate
imported = time.perf_counter() - start
start = time.perf_counter()
r = estimate(**{issue!r}, batch=1)
first = time.perf_counter() - start
print(json.dumps({{"import_s": imported, "first_s": first, "ttft_s": r.ttft_s,
                  "tpot_s": r.tpot_s}}))
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


def _child(code: str) -> dict:
    """Run ``code`` in a fresh interpreter at the repository's root; its last line's JSON."""
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=False
    )
    if result.returncode:
        raise RuntimeError(f"bench child failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


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
    rows = []
    cold = _child(_COLD.format(issue=ISSUE))
    case = "Llama 3.1 405B BF16, trn2 server TP 16, 2048/256, batch 1"
    rows.append(
        {
            "figure": f"trnsim infer estimate ({case}): first call in a fresh interpreter "
            f"(imports apart: {cold['import_s']:.2f} s)",
            "value": cold["first_s"] * 1e3,
            "unit": "ms",
            "target": "",
            "naive": "",
        }
    )
    _estimate()  # this process's first estimate: the hardware's costs and network built
    firsts = []
    for change in NEW_LAYOUTS:
        start = time.perf_counter()
        _estimate(**change)
        firsts.append(time.perf_counter() - start)
    names = ", ".join(",".join(f"{k}={v}" for k, v in c.items()) for c in NEW_LAYOUTS)
    rows.append(
        {
            "figure": f"... first call on a new layout, mean of {len(firsts)} ({names}; "
            f"the slowest {max(firsts) * 1e3:.1f} ms)",
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
