"""``python -m bench --only serve``: the speed of the serving simulation.

100,000 requests (Poisson, prompts lognormal with mean 1,000 tokens and sigma 0.8, outputs
uniform 100-500 tokens, max_batch 128, token_budget 2,048) through
:func:`tlm.inference.serving.simulate`, on a fleet of four colocated replicas and on a
disaggregated one (two prefill, four decode replicas), at 50 requests/s (a mean batch of about
70 and iterations of 10-85 ms). The issue's target: 100,000 requests in <= 60 s. Figures:
wall seconds, simulated requests per second of wall time, iterations per second.

The engine is a linear stand-in with the magnitudes of Llama 3 70B in BF16 on one trn2 server
(16 chips, TP 16; ``docs/serving.md``): 10 ms an iteration (weights read at 46.4 TB/s: 3 ms, and
the per-layer collectives' fixed costs), 27 us a token (2 x 70.6 GFLOP at half the 16 chips'
667 TFLOPS), 7.1 ns a KV token (320 KiB of K and V over 46.4 TB/s), 0.5 ns a query-key pair;
4,000,000 tokens of KV. The real engine's own time per call (``tlm.inference``'s, <= 20 us)
comes on top: iterations x its cost.

Measured and printed, never asserted.
"""

from __future__ import annotations

import time

__all__ = ["bench_serving", "LinearEngine"]

REQUESTS = 100_000


class LinearEngine:
    """``fixed_s + token_s tokens + kv_token_s kv_tokens + pair_s pairs`` seconds."""

    chips = 16
    kv_capacity_tokens = 4_000_000
    block_tokens = 16
    fixed_s, token_s, kv_token_s, pair_s = 10e-3, 27e-6, 7.1e-9, 0.5e-9

    def iteration_s(self, tokens, sequences, kv_tokens, pairs):
        return (
            self.fixed_s + self.token_s * tokens + self.kv_token_s * kv_tokens + self.pair_s * pairs
        )


def bench_serving() -> list[dict]:
    from tlm.inference.serving import simulate

    workload = dict(
        rate=50.0,
        requests=REQUESTS,
        prompt="lognormal:1000:0.8",
        output="uniform:100:500",
        max_batch=128,
        token_budget=2048,
        seed=0,
    )
    fleets = {
        "4 replicas": dict(replicas=4),
        "2 prefill + 4 decode replicas": dict(
            prefill_replicas=2,
            decode_replicas=4,
            kv_bytes_per_token=327_680,
            link_bandwidth_Bps=100e9,
            link_latency_s=50e-6,
        ),
    }
    rows = []
    for label, fleet in fleets.items():
        start = time.perf_counter()
        run = simulate(LinearEngine(), **workload, **fleet)
        wall = time.perf_counter() - start
        name = f"serving simulation, {REQUESTS:,} requests, {label}"
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
                "figure": f"{name}: {run.iterations:,} iterations, mean batch {run.mean_batch:.0f}",
                "value": run.iterations / wall,
                "unit": "iterations/s",
                "target": "",
                "naive": "",
            },
        ]
    return rows


if __name__ == "__main__":
    for row in bench_serving():
        print(f"{row['figure']}: {row['value']:,.3g} {row['unit']}")
