"""``python -m bench --only serve``: the speed of the serving simulation.

100,000 requests (Poisson, prompts lognormal with mean 1,000 tokens and sigma 0.8, outputs
uniform 100-500 tokens, max_batch 128, token_budget 2,048) through
:func:`tlm.inference.serving.simulate` on the inference model's own engine: Llama 3 70B in BF16
on one trn2 server per replica (``Engine.build("llama3-70b", "trn2", "server", tp=16,
max_tokens=2048)``: 16 chips, TP 16, the shipped fixed costs, 2.2 M tokens of KV), on a fleet of
four colocated replicas and on a disaggregated one (two prefill, four decode replicas; 320 KiB
of KV a token over 100 GB/s links). The issue's target: 100,000 requests in <= 60 s. Figures:
wall seconds (the engine's own time per call included), simulated requests per second of wall
time, iterations per second, and the engine's time per ``iteration_s`` call.

The rate, 20 requests/s, is about three quarters of what either fleet serves (four replicas at
batch 128 decode about 28 requests/s; two prefill replicas take about 27): a fleet that keeps
up, so that the figure is that of a steady serving run (a mean batch of about 60 colocated,
TTFT of a few hundred ms), not of a queue growing without bound - an overloaded run has fewer,
longer iterations and would flatter the wall time.

Measured and printed, never asserted.
"""

from __future__ import annotations

import time

from .common import best_time

__all__ = ["bench_serving"]

REQUESTS = 100_000
RATE = 20.0
TOKEN_BUDGET = 2048


def bench_serving() -> list[dict]:
    from tlm.inference import Engine
    from tlm.inference.serving import (
        Colocated,
        Disaggregated,
        KvLink,
        Poisson,
        Scheduler,
        Workload,
        simulate,
    )

    engine = Engine.build("llama3-70b", "trn2", "server", tp=16, max_tokens=TOKEN_BUDGET)
    workload = Workload(prompt="lognormal:1000:0.8", output="uniform:100:500", seed=0)
    load = Poisson(rate=RATE, requests=REQUESTS, workload=workload)
    scheduler = Scheduler(max_batch=128, token_budget=TOKEN_BUDGET)
    link = KvLink(bytes_per_token=327_680, bandwidth_Bps=100e9, latency_s=50e-6)
    fleets = {
        "4 replicas": Colocated(engine, replicas=4),
        "2 prefill + 4 decode replicas": Disaggregated(
            engine, prefill_replicas=2, decode_replicas=4, kv_transfer_s=link
        ),
    }
    what = f"Llama 3 70B BF16 on trn2 servers (TP 16), {RATE:g} requests/s"
    rows = []
    for label, fleet in fleets.items():
        start = time.perf_counter()
        run = simulate(fleet, load, scheduler)
        wall = time.perf_counter() - start
        name = f"serving simulation, {REQUESTS:,} requests, {label}, {what}"
        rows += [
            {"figure": name, "value": wall, "unit": "s", "target": "<= 60 s", "naive": ""},
            {
                "figure": f"{name}: simulated requests per wall second",
                "value": REQUESTS / wall,
                "unit": "requests/s",
                "target": ">= 1,667",
                "naive": "",
            },
            {
                "figure": f"{name}: {run.iterations:,} iterations, mean batch "
                f"{run.mean_batch:.0f}, served {run.throughput_rps:.1f} requests/s, TTFT p99 "
                f"{run.ttft_s.p99:.2f} s, TPOT mean {run.tpot_s.mean * 1e3:.0f} ms",
                "value": run.iterations / wall,
                "unit": "iterations/s",
                "target": "",
                "naive": "",
            },
        ]
    # a mid-run decode iteration (64 sequences at about 1,000 tokens of KV): the fast path
    calls = 10_000
    per_call = best_time(
        lambda: [engine.iteration_s(64, 64, 64_000 + i, 64_000 + i) for i in range(calls)],
        repeat=3,
    )
    rows.append(
        {
            "figure": "the engine's iteration_s, one scalar call (Llama 3 70B, trn2 server)",
            "value": per_call / calls * 1e6,
            "unit": "us",
            "target": "",
            "naive": "",
        }
    )
    return rows


if __name__ == "__main__":
    for row in bench_serving():
        print(f"{row['figure']}: {row['value']:,.3g} {row['unit']}")
