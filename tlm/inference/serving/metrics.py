"""What a serving simulation measures: :class:`ServingResult`, latency :class:`Summary` and the
:class:`Slo` that attainment is judged by.

Per request: TTFT (arrival to first token), TPOT (``(finish - first) / (output - 1)``, the mean
inter-token time after the first; none for one-token outputs) and end-to-end latency; their
means and p50/p90/p99 over completed requests. Throughput over the simulated time, from 0 (the
arrival window's start) to the last finish, so a fleet that cannot keep up reports what it
serves; time averages of the batch (over busy iterations) and of the KV occupancy; the mean
number in the system over the arrival window (Little's law); preemptions, rejections,
iterations; SLO attainment - the fraction of all requests, rejected ones failing, meeting
both SLOs.

Examples
--------
>>> import numpy as np
>>> s = Summary.of(np.array([1.0, 2.0, np.nan, 3.0]))
>>> s.mean, s.p50
(2.0, 2.0)
>>> Slo(ttft_s=1.0).tpot_s is None
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .checks import check_positive

__all__ = ["ServingResult", "Slo", "Summary", "serving_result"]


@dataclass(frozen=True)
class Slo:
    """A service-level objective: TTFT and TPOT bounds, seconds (either may be absent: always
    met).

    Parameters
    ----------
    ttft_s, tpot_s : float, optional
        > 0.
    """

    ttft_s: float | None = None
    tpot_s: float | None = None

    def __post_init__(self):
        for name in ("ttft_s", "tpot_s"):
            value = getattr(self, name)
            if value is not None:
                check_positive(name, value)


@dataclass(frozen=True)
class Summary:
    """Mean and percentiles of one latency, seconds (NaN when no request has it)."""

    mean: float
    p50: float
    p90: float
    p99: float

    @classmethod
    def of(cls, values: np.ndarray) -> Summary:
        values = values[~np.isnan(values)]
        if values.size == 0:
            return cls(math.nan, math.nan, math.nan, math.nan)
        p50, p90, p99 = np.percentile(values, [50, 90, 99])
        return cls(float(values.mean()), float(p50), float(p90), float(p99))


@dataclass
class ServingResult:
    """What a serving simulation measured.

    Latencies are seconds; throughputs per second of simulated time (``simulated_s``: from 0,
    the arrival window's start, to the last finish). Per-request arrays are indexed by request
    in arrival order; a rejected request has NaN latencies.

    Attributes
    ----------
    seed : int or None
        Seed of the random draws (None for a trace with nothing drawn).
    requests, completed, rejected : int
        Requests that arrived, finished, were rejected.
    rejected_reasons : dict
        Reason -> count: ``"kv_capacity"`` (colocated), ``"prefill_kv_capacity"``,
        ``"decode_kv_capacity"`` (disaggregated).
    preemptions : int
        Sequences preempted (recompute), all replicas.
    iterations : int
        Iterations run, all replicas.
    ttft_s, tpot_s, e2e_s : Summary
        Time to first token, time per output token after the first, end-to-end latency.
    throughput_rps, output_tokens_per_s : float
        Completed requests and their output tokens per second.
    throughput_rps_per_chip, output_tokens_per_s_per_chip : float
        The same per chip of the fleet (``chips``).
    mean_batch : float
        Sequences per iteration, weighted by iteration time (busy time only).
    kv_occupancy : float
        Fraction of KV blocks in use, time average over the simulated time and the replicas.
    mean_in_system : float
        Requests arrived and not yet finished, time average over the arrival window (Little's
        law: ``rate * e2e_s.mean`` in a steady state).
    slo_ttft_s, slo_tpot_s : float or None
        The SLO; ``slo_attainment`` is the fraction of all requests (rejected ones fail)
        meeting both (a one-token request meets any TPOT). NaN without an SLO.
    chips : int
        Chips of the fleet (every replica of every pool).
    per_request : dict of numpy arrays
        ``arrival_s``, ``prompt``, ``output``, ``ttft_s``, ``tpot_s``, ``e2e_s``,
        ``preemptions``, ``replica`` (of the prefill, -1 if rejected), ``rejected`` (bool).
    timeline : dict of numpy arrays or None
        With ``timeline=True``, one row per iteration: ``replica``, ``start_s``, ``duration_s``,
        ``tokens``, ``sequences``, ``kv_tokens``, ``pairs``, ``decodes``, ``kv_blocks``.
    """

    seed: int | None
    requests: int
    completed: int
    rejected: int
    rejected_reasons: dict
    preemptions: int
    iterations: int
    simulated_s: float
    ttft_s: Summary
    tpot_s: Summary
    e2e_s: Summary
    throughput_rps: float
    output_tokens_per_s: float
    throughput_rps_per_chip: float
    output_tokens_per_s_per_chip: float
    mean_batch: float
    kv_occupancy: float
    mean_in_system: float
    slo_ttft_s: float | None
    slo_tpot_s: float | None
    slo_attainment: float
    chips: int
    per_request: dict = field(repr=False)
    timeline: dict | None = field(default=None, repr=False)

    def figures(self) -> dict:
        """The scalar figures as a flat dict (latency summaries as ``ttft_s_p90`` and so on),
        ready for JSON."""
        out = {}
        for name, value in vars(self).items():
            if name in ("per_request", "timeline"):
                continue
            if isinstance(value, Summary):
                out |= {f"{name}_{k}": v for k, v in vars(value).items()}
            else:
                out[name] = dict(value) if isinstance(value, dict) else value
        return out


_TIMELINE = (
    "replica",
    "start_s",
    "duration_s",
    "tokens",
    "sequences",
    "kv_tokens",
    "pairs",
    "decodes",
    "kv_blocks",
)


def serving_result(sim, replicas, chips: int, seed, slo: Slo) -> ServingResult:
    """The result of a simulation that has run.

    Parameters
    ----------
    sim
        The simulation's ledger: ``arrival``, ``prompt``, ``output``, ``first_s``,
        ``finish_s``, ``rejected``, ``reasons``, ``preempted``, ``replica_of``,
        ``completed``, ``window_area`` and ``timeline`` (a list of rows or None).
    replicas : list of Replica
        Every replica of the fleet, for the busy time, batch and KV integrals.
    chips : int
        Of the fleet.
    seed : int or None
    slo : Slo
    """
    arrival, output = sim.arrival, sim.output
    ttft = sim.first_s - arrival
    e2e = sim.finish_s - arrival
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(output > 1, (sim.finish_s - sim.first_s) / (output - 1), np.nan)
    done = ~sim.rejected
    end = float(np.nanmax(sim.finish_s)) if done.any() else float(arrival[-1])
    simulated = max(end, float(arrival[-1]))
    reps = replicas
    kv_occupancy = (
        np.mean([(r.kv_area + r.used * (simulated - r.kv_t)) / (r.total * simulated) for r in reps])
        if simulated > 0
        else 0.0
    )
    busy = sum(r.busy_s for r in reps)
    out_tokens = float(output[done].sum())
    ok = done.copy()
    if slo.ttft_s is not None:
        ok &= ttft <= slo.ttft_s
    if slo.tpot_s is not None:
        ok &= np.isnan(tpot) | (tpot <= slo.tpot_s)
    attainment = (
        float(ok.mean()) if (slo.ttft_s is not None or slo.tpot_s is not None) else math.nan
    )
    window = float(arrival[-1])
    timeline = None
    if sim.timeline is not None:
        table = np.array(sim.timeline, float).reshape(-1, len(_TIMELINE))
        timeline = {c: table[:, i] for i, c in enumerate(_TIMELINE)}
        for c in _TIMELINE:
            if c not in ("start_s", "duration_s"):
                timeline[c] = timeline[c].astype(np.int64)
    return ServingResult(
        seed=seed,
        requests=len(arrival),
        completed=sim.completed,
        rejected=int(sim.rejected.sum()),
        rejected_reasons=dict(sim.reasons),
        preemptions=sum(r.preemptions for r in reps),
        iterations=sum(r.iterations for r in reps),
        simulated_s=simulated,
        ttft_s=Summary.of(ttft),
        tpot_s=Summary.of(tpot),
        e2e_s=Summary.of(e2e),
        throughput_rps=sim.completed / simulated if simulated > 0 else math.nan,
        output_tokens_per_s=out_tokens / simulated if simulated > 0 else math.nan,
        throughput_rps_per_chip=sim.completed / simulated / chips if simulated > 0 else math.nan,
        output_tokens_per_s_per_chip=out_tokens / simulated / chips if simulated > 0 else math.nan,
        mean_batch=sum(r.batch_area for r in reps) / busy if busy > 0 else 0.0,
        kv_occupancy=float(kv_occupancy),
        mean_in_system=sim.window_area / window if window > 0 else math.nan,
        slo_ttft_s=slo.ttft_s,
        slo_tpot_s=slo.tpot_s,
        slo_attainment=attainment,
        chips=chips,
        per_request={
            "arrival_s": arrival,
            "prompt": sim.prompt,
            "output": output,
            "ttft_s": ttft,
            "tpot_s": tpot,
            "e2e_s": e2e,
            "preemptions": sim.preempted,
            "replica": sim.replica_of,
            "rejected": sim.rejected,
        },
        timeline=timeline,
    )
