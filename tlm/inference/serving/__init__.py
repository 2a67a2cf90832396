"""The serving simulation: requests arriving at model replicas that batch them iteration by
iteration, with a paged KV cache, chunked prefill, preemption and optional prefill/decode
disaggregation; latency percentiles, throughput and the rate a fleet sustains under an SLO.

A discrete-event simulation on SimPy, by role:

- :mod:`~.requests`: what arrives and when - Poisson, a trace file, a closed loop of clients;
- :mod:`~.scheduling`: the scheduler's settings, its prefill policies and admission rules;
- :mod:`~.replica`: a replica's queue, KV blocks (kept as aggregates), preemption, iterations;
- :mod:`~.fleet`: colocated or disaggregated pools of replicas, routing, the KV transfer;
- :mod:`~.metrics`: :class:`ServingResult`, latency :class:`Summary`, the :class:`Slo`;
- :mod:`~.slo`: :func:`max_rate`, the highest rate within an SLO, and its rules;
- :mod:`~.simulation`: :func:`simulate`, the run that ties them;
- :mod:`~.checks`: the argument checks, raising
  :class:`~tlm.inference.errors.InferenceInputError`.

See ``docs/serving.md``.

Examples
--------
>>> class Linear:                      # 10 ms an iteration + 1 ms a token
...     chips, kv_capacity_tokens, block_tokens = 1, 4096, 16
...     def iteration_s(self, tokens, sequences, kv_tokens, pairs):
...         return 0.010 + 0.001 * tokens
>>> load = Poisson(rate=1.0, requests=1, workload=Workload(prompt=100, output=11))
>>> run = simulate(Colocated(Linear()), load, Scheduler(token_budget=256))
>>> round(run.ttft_s.mean, 6), round(run.tpot_s.mean, 6)   # one prefill of 100, decodes of 1
(0.11, 0.011)
>>> round(run.e2e_s.mean, 6), run.iterations
(0.22, 11)
"""

from .fleet import ROUTERS, Colocated, Disaggregated, Fleet, KvLink
from .metrics import ServingResult, Slo, Summary
from .requests import (
    LOAD_KINDS,
    ClosedLoop,
    Load,
    Poisson,
    Trace,
    TraceError,
    Workload,
    parse_lengths,
    read_trace,
)
from .scheduling import ADMISSIONS, PREFILLS, Scheduler
from .simulation import simulate
from .slo import RULES, MaxRate, max_rate, meets

__all__ = [
    "ADMISSIONS",
    "LOAD_KINDS",
    "PREFILLS",
    "ROUTERS",
    "RULES",
    "ClosedLoop",
    "Colocated",
    "Disaggregated",
    "Fleet",
    "KvLink",
    "Load",
    "MaxRate",
    "Poisson",
    "Scheduler",
    "ServingResult",
    "Slo",
    "Summary",
    "Trace",
    "TraceError",
    "Workload",
    "max_rate",
    "meets",
    "parse_lengths",
    "read_trace",
    "simulate",
]
