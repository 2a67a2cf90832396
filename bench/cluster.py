"""``python -m bench --only cluster``: figures of the cluster model.

* memory per chip (:func:`tlm.cluster.memory_per_chip`), vectorised: configurations per
  second over one call of 1,000,000 random configurations (dp, tp, pp, cp, ep, ZeRO stage,
  micro-batch, sequence parallelism, recomputation, interleaving; invalid ones included, as a
  search's grid has them) for a dense model (Llama 3 405B) and a MoE (DeepSeek-V3); the
  strategy search's inner loop (the issue's search target: >= 20,000 configurations/s);
* one configuration through the same function (scalars): the latency of a single estimate;
* one training estimate at 1,048,576 chips: the step with its memory (``training_step``), and
  the whole estimate - step, memory, goodput, power and cost of one layout (``evaluate``);
* the communication model (:class:`tlm.cluster.network.Network`, trn2 UltraServers): rows per
  second of one ``collective_s`` call over 1,000,000 random (group, stride, bytes) rows - inside
  the UltraServer, hierarchical and over EFA - once its per-(group, stride) closed forms are
  built (target >= 1,000,000 rows/s), the first call that builds them, and ``p2p_s``.

Measured and printed, never asserted.
"""

from __future__ import annotations

import numpy as np

from .common import best_time

__all__ = ["bench_cluster", "bench_network", "random_configurations"]

N = 1_000_000


def random_configurations(n: int, seed: int = 0) -> dict:
    """``n`` configurations drawn from the usual values of each parallel dimension."""
    rng = np.random.default_rng(seed)
    return dict(
        dp=rng.choice([1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024], n),
        tp=rng.choice([1, 2, 4, 8, 16, 32, 64], n),
        pp=rng.choice([1, 2, 4, 8, 16, 32], n),
        cp=rng.choice([1, 2, 4, 8], n),
        ep=rng.choice([1, 8, 16, 32, 64], n),
        zero=rng.integers(0, 4, n),
        micro_batch=rng.choice([1, 2, 4], n),
        sp=rng.integers(0, 2, n).astype(bool),
        recompute=rng.integers(0, 3, n),
        interleave=rng.choice([1, 2], n),
    )


def bench_cluster() -> list[dict]:
    from tlm.cluster import hbm_capacity_bytes, memory_per_chip
    from tlm.cluster.layout import Layout
    from tlm.workloads import load_model

    rows = []
    hbm = hbm_capacity_bytes("trn2")
    cfg = random_configurations(N)
    for name in ("llama3-405b", "deepseek-v3"):
        model = load_model(name)
        if not model.moe:
            dense = dict(cfg, ep=np.ones(N, dtype=np.int64))
        else:
            dense = cfg
        result = {}

        def run(model=model, dense=dense, result=result):
            result["r"] = memory_per_chip(model, Layout(**dense), hbm_bytes=hbm)

        seconds = best_time(run, repeat=3)
        r = result["r"]
        valid = int((r.reason == 0).sum())
        fits = int(r.fits.sum())
        rows.append(
            {
                "figure": f"memory per chip, {name}, {N:,} configurations in one call "
                f"({valid:,} valid, {fits:,} fit trn2)",
                "value": N / seconds,
                "unit": "configurations/s",
                "target": ">= 20,000",
                "naive": "",
            }
        )
        single = best_time(
            lambda model=model: memory_per_chip(
                model,
                layout=Layout(dp=64, tp=8, pp=16, zero=1, sp=True, recompute="selective"),
                hbm_bytes=hbm,
            ),
            repeat=50,
        )
        rows.append(
            {
                "figure": f"memory per chip, {name}, one configuration (scalars)",
                "value": single * 1e6,
                "unit": "us",
                "target": "",
                "naive": "",
            }
        )
    return rows + bench_network() + bench_training()


def bench_training() -> list[dict]:
    """The step model, the search and the training validation."""
    import time

    from tlm.cluster.layout import Layout
    from tlm.cluster.network import Network
    from tlm.cluster.search import candidates, evaluate, search
    from tlm.cluster.training import training_step
    from tlm.costs import OpCosts
    from tlm.hardware import load_hardware
    from tlm.validation.training import validate_training
    from tlm.workloads import load_model

    m, hw = load_model("llama3-405b"), load_hardware("trn2")
    costs, net = OpCosts.for_preset("trn2"), Network.for_hardware(hw)
    rows = []
    # one estimate at 1,048,576 chips, a different layout each call (no cache of a result;
    # what depends only on the model, the hardware and a shape class or a (group, stride) -
    # the per-class operator times, the network's closed forms, the goodput of a chip count -
    # is built by the first calls and kept, as a search or a study keeps it)
    layouts = [
        dict(dp=1024, tp=16, pp=16, cp=4),
        dict(dp=512, tp=32, pp=16, cp=4),
        dict(dp=2048, tp=16, pp=8, cp=4),
        dict(dp=1024, tp=8, pp=32, cp=4),
    ]
    calls = [dict(micro_batch=1 + i % 2, **layouts[i % 4]) for i in range(40)]

    def step(call):
        layout = Layout(zero=1, sp=True, recompute="selective", **call)
        return training_step(m, costs, net, layout, hbm_bytes=hw.hbm_bytes)

    rows_of_one = [
        {
            k: np.array([v])
            for k, v in dict(chips=1 << 20, ep=1, zero=1, interleave=1, recompute=1, **c).items()
        }
        for c in calls
    ]
    for call, one in zip(calls[:8], rows_of_one[:8], strict=True):  # warm-up
        step(call)
        evaluate(m, hw, one)

    def per_call(fn, args):
        return best_time(lambda: [fn(a) for a in args], repeat=5) / len(args)

    single = per_call(step, calls)
    rows.append(
        {
            "figure": "training step + memory, one estimate of Llama 3 405B at 1,048,576 trn2 "
            "chips (scalars, one call of training_step)",
            "value": single * 1e3,
            "unit": "ms",
            "target": "<= 1",
            "naive": "Calculon 13.6 ms",
        }
    )
    whole = per_call(lambda one: evaluate(m, hw, one), rows_of_one)
    rows.append(
        {
            "figure": "one estimate of Llama 3 405B at 1,048,576 trn2 chips: step + memory + "
            "goodput + power + cost (one layout, one call of search.evaluate)",
            "value": whole * 1e3,
            "unit": "ms",
            "target": "<= 1",
            "naive": "Calculon 13.6 ms",
        }
    )
    # the same model over many layouts in one call: the search's per-estimate cost
    counts = [1024, 4096, 16384, 65536, 262144, 1048576]
    parts = [candidates(m, n)[0] for n in counts]
    every = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    n_layouts = len(every["chips"])
    seconds = best_time(lambda: evaluate(m, hw, every), repeat=2)
    rows.append(
        {
            "figure": f"training step + memory + goodput + cost, {n_layouts:,} layouts of Llama 3 "
            "405B on 1k-1M trn2 chips, one call",
            "value": n_layouts / seconds,
            "unit": "layouts/s",
            "target": ">= 20,000",
            "naive": "Calculon ~155/s",
        }
    )
    # the search end to end (enumerate, chunk, evaluate, gather, pick) over >= 1,000,000
    # layouts: DeepSeek-V3 (expert parallelism multiplies the layouts) on 1k-1M chips
    moe = load_model("deepseek-v3")
    big = [2**i for i in range(10, 21)]
    for scheduler, workers in (("inline", None), ("local", 1), ("local", 2)):
        start = time.perf_counter()
        found = search(moe, hw, big, scheduler=scheduler, chunk=200_000, workers=workers)
        took = time.perf_counter() - start
        found.best("time")
        rows.append(
            {
                "figure": f"train-search, DeepSeek-V3, {found.evaluated:,} layouts (11 chip counts "
                f"1k-1M), scheduler {scheduler}"
                + (
                    f" (a local Dask cluster of {workers} worker{'s' if workers > 1 else ''}, its "
                    "start-up included)"
                    if scheduler == "local"
                    else " (this process)"
                ),
                "value": found.evaluated / took,
                "unit": "layouts/s",
                "target": ">= 20,000",
                "naive": "Calculon ~155/s",
            }
        )
    start = time.perf_counter()
    runs = len(validate_training().rows)
    rows.append(
        {
            "figure": f"trnsim validate --suite training ({runs} published runs, the fits "
            "included)",
            "value": time.perf_counter() - start,
            "unit": "s",
            "target": "<= 10",
            "naive": "",
        }
    )
    return rows


def bench_network() -> list[dict]:
    import time

    from tlm.cluster.network import Network
    from tlm.hardware import load_hardware

    rng = np.random.default_rng(0)
    group = rng.choice([1, 2, 4, 8, 16, 32, 64, 128, 256, 1024], N)
    stride = rng.choice([1, 2, 4, 8, 16, 32, 64, 128, 512], N)
    nbytes = rng.uniform(1e3, 1e10, N)
    net = Network.for_hardware(load_hardware("trn2"))
    start = time.perf_counter()
    net.collective_s("all_reduce", group, stride, nbytes)
    first = time.perf_counter() - start
    pairs = len({(int(g), int(s)) for g, s in zip(group[:10000], stride[:10000], strict=True)})
    steady = best_time(lambda: net.collective_s("all_reduce", group, stride, nbytes), repeat=3)
    p2p = best_time(lambda: net.p2p_s(nbytes, stride), repeat=3)
    return [
        {
            "figure": f"network: all_reduce times, {N:,} rows of {pairs} (group, stride) "
            "pairs on trn2 UltraServers, one call",
            "value": N / steady,
            "unit": "rows/s",
            "target": ">= 1,000,000",
            "naive": "",
        },
        {
            "figure": "network: the first such call (routes, schedules, closed forms built)",
            "value": first,
            "unit": "s",
            "target": "",
            "naive": "",
        },
        {
            "figure": f"network: p2p_s, {N:,} rows, one call",
            "value": N / p2p,
            "unit": "rows/s",
            "target": "",
            "naive": "",
        },
    ]
