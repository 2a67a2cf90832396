"""``python -m bench --only cluster``: figures of the cluster model.

* memory per chip (:func:`tlm.cluster.memory_per_chip`), vectorised: configurations per
  second over one call of 1,000,000 random configurations (dp, tp, pp, cp, ep, ZeRO stage,
  micro-batch, sequence parallelism, recomputation, interleaving; invalid ones included, as a
  search's grid has them) for a dense model (Llama 3 405B) and a MoE (DeepSeek-V3); the
  strategy search's inner loop (the issue's search target: >= 20,000 configurations/s);
* one configuration through the same function (scalars): the latency of a single estimate;
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
            result["r"] = memory_per_chip(model, hbm_bytes=hbm, **dense)

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
                dp=64,
                tp=8,
                pp=16,
                zero=1,
                sp=True,
                recompute="selective",
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
    return rows + bench_network()


def bench_network() -> list[dict]:
    import time

    from tlm.cluster.hardware import load_hardware
    from tlm.cluster.network import Network

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
