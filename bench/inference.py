"""``python -m bench --only infer``: the speed of one inference estimate and of the inference
validation.

* one ``trnsim infer`` estimate - :func:`tlm.inference.estimate` - against the issue's target
  (<= 5 ms):

  - **cold**: the first estimate in a fresh interpreter (a ``trnsim infer`` command is one),
    its imports timed apart, on :data:`COLD` (six layouts: dense and MoE, trn2 server,
    UltraServer and H100), a fresh interpreter per sample (the best of three per layout in
    the warm states), in three states of the cache of
    derived figures on disk (:mod:`tlm.diskcache`): **empty** (the first command after the
    package was installed or changed: hardware, model and preset files parsed, operator costs
    and the network's collective closed forms worked out, then written); **a new request**
    (the cache warm from other commands on that hardware and group shape; the layout's
    operator tables evaluated at the request's new token counts); **the same command again**
    (everything loaded); **after the warm-up** ``make setup`` runs (:mod:`tlm.inference.warm`,
    its time printed too), a request of its own on each layout - what a user's first command
    after installing pays. Mean and slowest of each;
  - **fingerprint**: the package's fingerprint alone (:func:`tlm.diskcache.fingerprint`,
    part of every warm command's first estimate) in a fresh interpreter, through the
    manifest the earlier commands left: the best of :data:`COLD_REPEATS`;
  - **new layout**: the first call on each of four layouts not built before in a process that
    has already run one estimate (FP8 weights, FP8 KV cache, TP 8 in FP8, TP 16 x PP 2 on two
    servers): what a study or a search pays per new engine;
  - **steady state**: the best of 50 calls on the issue's layout (Llama 3.1 405B BF16, trn2
    server TP 16, 2048/256, batch 1; the engine kept, its result not: every call prices the
    prefill and all 256 decode steps again);
  - the first call on the UltraServer (64 chips, TP 64) in this process, which works out its
    network's closed forms;

* ``trnsim validate --suite inference`` (``python -m tlm``): the fit of the three fixed costs
  and the collective bandwidth factor per system (each fit row evaluated at every factor of the
  grid) and every modelled row, the command's wall time (start-up and imports included); and
  ``validate_inference()`` alone, after the imports, in a fresh interpreter; both with the
  cache on disk off (what every first run pays).

Fresh interpreters because the estimate's tables and the validation's evaluations are kept for
the process's life (``Engine.build``'s cache, ``lru_cache``): a second run in one process would
time the caches. Measured and printed, never asserted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
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

#: Layouts of the cold figures (a request, then another request on the same layout).
COLD = (
    dict(model="llama3.1-405b", hardware="trn2", system="server", tp=16),
    dict(model="llama3-8b", hardware="trn2", system="server", tp=4, batch=8),
    dict(model="llama3.3-70b", hardware="trn2", system="ultraserver", tp=64),
    dict(model="mixtral-8x7b", hardware="trn2", system="server", tp=8, ep=8, batch=16),
    dict(model="deepseek-v3", hardware="trn2", system="ultraserver", tp=64, ep=64, fmt="fp8"),
    dict(model="llama3.3-70b", hardware="h100", system="server", tp=8),
)
#: What a new request changes (new token counts: new operator-table entries).
NEW_REQUEST = dict(prompt=1000, output=100)
#: Fresh interpreters per layout and warm state, the best kept (the machine is shared).
COLD_REPEATS = 3

_COLD = """
import json, sys, time
start = time.perf_counter()
from tlm.inference import estimate
from tlm import diskcache
imported = time.perf_counter() - start
args = json.loads(sys.argv[1])
start = time.perf_counter()
r = estimate(**args)
first = time.perf_counter() - start
diskcache.flush()  # as trnsim does after a command
print(json.dumps({"import_s": imported, "first_s": first, "ttft_s": r.ttft_s}))
"""
_WARM = """
import json
from tlm.inference.warm import warm
print(json.dumps({"built": warm()}))
"""
_FINGERPRINT = """
import json, time
from tlm import diskcache
listing, listed = diskcache._listing, []
diskcache._listing = lambda: listed.append(1) or listing()
start = time.perf_counter()
diskcache.fingerprint()
took = time.perf_counter() - start
print(json.dumps({"fingerprint_s": took, "listed": bool(listed)}))
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


def _child(code: str, *args: str, cache="off") -> dict:
    """Run ``code`` in a fresh interpreter at the repository's root, with the cache on disk in
    ``cache`` (off by default); its last line's JSON."""
    env = dict(os.environ, TRNSIM_CACHE_DIR=str(cache))
    result = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
        env=env,
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


def _cold() -> tuple[dict, float, dict, dict]:
    """Per cache state, the first estimate's seconds in a fresh interpreter on every layout of
    :data:`COLD` (the best of :data:`COLD_REPEATS` interpreters for the warm states, each new
    request with a prompt of its own); the mean import time; the fingerprint's seconds
    alone in a fresh interpreter through the manifest (the best of :data:`COLD_REPEATS`); and
    the warm-up's seconds and layouts built."""
    states = {"empty": [], "new request": [], "again": [], "after the warm-up": []}
    imports = []
    fingerprint = None
    with tempfile.TemporaryDirectory() as folder:
        warmed = os.path.join(folder, "warmed")
        start = time.perf_counter()
        built = _child(_WARM, cache=warmed)["built"]
        warm_s = time.perf_counter() - start
        for layout in COLD:  # a request of its own on each layout, after make setup's warm-up
            runs = []
            for r in range(COLD_REPEATS):
                request = {**layout, **NEW_REQUEST, "prompt": NEW_REQUEST["prompt"] + 10 + r}
                runs.append(_child(_COLD, json.dumps(request), cache=warmed))
            states["after the warm-up"].append(min(run["first_s"] for run in runs))
        for i, layout in enumerate(COLD):
            cache = os.path.join(folder, str(i))  # empty for each layout's first sample
            runs = {"empty": [_child(_COLD, json.dumps(layout), cache=cache)]}
            for r in range(COLD_REPEATS):
                request = {**layout, **NEW_REQUEST, "prompt": NEW_REQUEST["prompt"] + r}
                runs.setdefault("new request", []).append(
                    _child(_COLD, json.dumps(request), cache=cache)
                )
            for _ in range(COLD_REPEATS):
                runs.setdefault("again", []).append(_child(_COLD, json.dumps(request), cache=cache))
            for state, samples in runs.items():
                states[state].append(min(run["first_s"] for run in samples))
                imports += [run["import_s"] for run in samples]
        runs = [_child(_FINGERPRINT, cache=cache) for _ in range(COLD_REPEATS)]
        fingerprint = min(runs, key=lambda run: run["fingerprint_s"])
    warmup = {"seconds": warm_s, "built": built}
    return states, sum(imports) / len(imports), fingerprint, warmup


def bench_inference() -> list[dict]:
    from tlm import diskcache

    # the figures in this process and the validation's with the cache on disk off: what a
    # process that has not run them before pays
    with diskcache.cache_dir("off"):
        return _bench()


def _bench() -> list[dict]:
    rows = []
    states, imported, fingerprint, warmup = _cold()
    what = {
        "empty": "the cache on disk empty (the first command after installing or changing the "
        "package)",
        "new request": f"the cache warm from another request on the layout, a new request "
        f"({NEW_REQUEST['prompt']}/{NEW_REQUEST['output']} tokens: new operator-table entries)",
        "again": "the same command again (everything loaded from the cache)",
        "after the warm-up": f"after make setup's warm-up ({warmup['built']:,} layouts in "
        f"{warmup['seconds']:.1f} s, python -m tlm.inference.warm), a request of its own",
    }
    for state, times in states.items():
        rows.append(
            {
                "figure": f"trnsim infer estimate, first call in a fresh interpreter on "
                f"{len(COLD)} layouts (imports apart: {imported:.2f} s), {what[state]}: mean "
                f"(the slowest {max(times) * 1e3:.1f} ms)",
                "value": sum(times) / len(times) * 1e3,
                "unit": "ms",
                "target": "<= 5 ms",
                "naive": "",
            }
        )
    how = "the package listed" if fingerprint["listed"] else "through the manifest"
    rows.append(
        {
            "figure": f"... of which the package's fingerprint ({how}), in a fresh "
            f"interpreter: best of {COLD_REPEATS}",
            "value": fingerprint["fingerprint_s"] * 1e3,
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
        env=dict(os.environ),  # the cache on disk off (set above)
    )
    whole = time.perf_counter() - start
    v = _child(_VALIDATE)  # the cache on disk off
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
