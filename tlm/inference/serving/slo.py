"""The highest arrival rate a fleet sustains under an SLO (:func:`max_rate`), and the rules
that say whether a run meets its SLO.

Rules, by name in :data:`SLO_RULES` (names :data:`RULES`), each a small class whose
``excess(run, target)`` is <= 0 when ``run`` meets its SLO (the larger, the further it misses):

- ``"attainment"``: at least ``target`` of the requests meet both SLOs (``target -
  attainment``);
- ``"percentile"``: the ``100 target`` percentile of TTFT and of TPOT are within them,
  rejected requests counting as infinitely late (the larger relative excess).

:func:`max_rate` bisects the Poisson rate. Each simulation runs the same requests with the same
seed (common random numbers: a higher rate sees the same requests sooner). The bracket starts
from the fleet's capacity ``c``, measured by one saturated run (every request at once): if
``c`` meets the rule the rate doubles until it fails, else it halves until it holds (below
``c / 1000``: :class:`~tlm.inference.errors.SloUnreachable`) - starting high because low rates
are the slow runs (each request alone, an iteration per token). Then bisection (geometric
while the bracket spans more than 4x) until the bracket is within ``rel_tol`` of its lower
end.
"""

from __future__ import annotations

import abc
import math
import numbers
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ..errors import InferenceInputError, SloUnreachable
from .checks import Registry, check_int, check_positive
from .fleet import Fleet
from .metrics import ServingResult, Slo
from .requests import Poisson, Workload
from .scheduling import Scheduler
from .simulation import simulate

__all__ = [
    "RULES",
    "SLO_RULES",
    "Attainment",
    "MaxRate",
    "Percentile",
    "Rule",
    "SloUnreachable",
    "max_rate",
    "meets",
]

#: The rules by name.
SLO_RULES = Registry("rule")


class Rule(abc.ABC):
    """What meeting an SLO means for a run."""

    name: ClassVar[str]

    @abc.abstractmethod
    def excess(self, run: ServingResult, target: float) -> float:
        """<= 0 when ``run`` meets its SLO; the larger, the further it misses."""


@SLO_RULES.register("attainment")
class Attainment(Rule):
    """At least ``target`` of the requests meet both SLOs."""

    def excess(self, run, target):
        return target - run.slo_attainment


@SLO_RULES.register("percentile")
class Percentile(Rule):
    """The ``100 target`` percentile of TTFT is at most ``slo_ttft_s`` and that of TPOT at most
    ``slo_tpot_s``, rejected requests counting as infinitely late."""

    def excess(self, run, target):
        done = ~run.per_request["rejected"]
        worst = -math.inf
        for name, slo in (("ttft_s", run.slo_ttft_s), ("tpot_s", run.slo_tpot_s)):
            if slo is None:
                continue
            values = np.where(done, run.per_request[name], np.inf)
            if name == "tpot_s":
                values = np.where(np.isnan(values), 0.0, values)  # one-token requests
            q = float(np.quantile(values, target, method="higher"))
            worst = max(worst, q / slo - 1)
        return worst


#: The rules' names.
RULES = SLO_RULES.names


def _check_target(target) -> float:
    if not (isinstance(target, numbers.Real) and 0 < target <= 1):
        raise InferenceInputError("target", target, "a fraction in (0, 1]")
    return target


def meets(run: ServingResult, rule: str = "attainment", target: float = 0.9) -> bool:
    """Whether ``run`` meets its SLO under ``rule`` at ``target``.

    >>> class Run:
    ...     slo_attainment = 0.95
    >>> meets(Run(), "attainment", 0.9)
    True
    """
    return SLO_RULES.named(rule)().excess(run, _check_target(target)) <= 0


@dataclass
class MaxRate:
    """The highest arrival rate meeting an SLO, found by bisection.

    Attributes
    ----------
    rate : float
        Requests per second: the highest rate tried that met the rule.
    run : ServingResult
        The simulation at ``rate``.
    rule : str
    target : float
    runs : list of (rate, met, metric)
        Every simulation, in order (``metric <= 0`` when met; see the rule).
    """

    rate: float
    run: ServingResult
    rule: str
    target: float
    runs: list


def max_rate(
    fleet: Fleet,
    slo: Slo,
    workload: Workload = Workload(),
    scheduler: Scheduler = Scheduler(),
    *,
    requests: int = 2000,
    rule: str = "attainment",
    target: float = 0.9,
    rel_tol: float = 0.02,
    max_runs: int = 40,
) -> MaxRate:
    """The highest Poisson arrival rate a fleet serves within an SLO (the search: see the
    module).

    Parameters
    ----------
    fleet, scheduler
        As :func:`~tlm.inference.serving.simulate`.
    slo : Slo
        The SLO, with ``ttft_s`` or ``tpot_s`` (or both).
    workload : Workload
        The requests' lengths and seed, the same at every rate.
    requests : int
        Requests of each simulation.
    rule : str
        One of :data:`RULES`.
    target : float
        In (0, 1]: the attainment or the percentile's fraction.
    rel_tol : float
        Relative width of the final bracket, > 0.
    max_runs : int
        Simulations allowed (the saturated one included), >= 3.

    Returns
    -------
    MaxRate

    Raises
    ------
    SloUnreachable
        When the SLO fails below a thousandth of the capacity, with the figures of that run.
    InferenceInputError
        Naming ``requests`` when all of them arriving at once meet the SLO: every rate does.

    Examples
    --------
    >>> from tlm.inference.serving import Colocated, Workload
    >>> class Linear:                      # 10 ms an iteration + 0.1 ms a token
    ...     chips, kv_capacity_tokens, block_tokens = 1, 1 << 20, 16
    ...     def iteration_s(self, tokens, sequences, kv_tokens, pairs):
    ...         return 0.010 + 1e-4 * tokens
    >>> best = max_rate(Colocated(Linear()), Slo(ttft_s=0.3, tpot_s=0.05),
    ...                 Workload("uniform:50:300", "uniform:20:100", seed=3), requests=400)
    >>> round(best.rate, 1), best.run.slo_attainment >= 0.9, len(best.runs)
    (32.8, True, 8)
    """
    judge = SLO_RULES.named(rule)()
    _check_target(target)
    if not isinstance(slo, Slo) or (slo.ttft_s is None and slo.tpot_s is None):
        raise InferenceInputError(
            "slo",
            slo,
            "an Slo with ttft_s or tpot_s (or both)",
            f"max_rate needs an Slo with ttft_s or tpot_s (or both), not {slo!r}",
        )
    if not isinstance(workload, Workload):
        raise InferenceInputError("workload", workload, "a Workload")
    requests = check_int("requests", requests, 1)
    rel_tol = check_positive("rel_tol", rel_tol)
    max_runs = check_int("max_runs", max_runs, 3)
    runs = []

    def run_at(rate):
        if len(runs) >= max_runs:
            raise RuntimeError(
                f"max_rate: {max_runs} simulations did not narrow the bracket to "
                f"rel_tol={rel_tol} (runs: {runs})"
            )
        load = Poisson(rate=rate, requests=requests, workload=workload)
        result = simulate(fleet, load, scheduler, slo)
        metric = judge.excess(result, target)
        runs.append((rate, metric <= 0, metric))
        return result, metric <= 0

    # capacity: every request at (almost) once
    saturated, met = run_at(1e9)
    if met:  # then every rate meets it: no highest rate shows within this many requests
        raise InferenceInputError(
            "requests",
            requests,
            "more requests than the fleet serves within the SLO when they all arrive at once",
            f"requests must be more than the fleet serves within the SLO when they all arrive "
            f"at once, not {requests}: all {requests} at once meet it (rule {rule!r}, target "
            f"{target}), so every rate does",
        )
    capacity = saturated.throughput_rps
    hi_run, ok = run_at(capacity)
    if ok:  # a short run can beat the saturated capacity: widen until the rule fails
        lo, lo_run, hi = capacity, hi_run, 2 * capacity
        hi_run, ok = run_at(hi)
        while ok:
            lo, lo_run, hi = hi, hi_run, 2 * hi
            hi_run, ok = run_at(hi)
    else:  # halve until the rule holds; the low rates are the slow runs (requests alone)
        hi, lo = capacity, capacity / 2
        while True:
            lo_run, ok = run_at(lo)
            if ok:
                break
            if lo < capacity / 1000:
                raise SloUnreachable(
                    f"no rate meets the SLO (rule {rule!r}, target {target}): at "
                    f"{lo:.4g} requests/s (under a thousandth of the capacity, "
                    f"{capacity:.4g}/s) TTFT p90 {lo_run.ttft_s.p90:.4g} s (SLO {slo.ttft_s}), "
                    f"TPOT p90 {lo_run.tpot_s.p90:.4g} s (SLO {slo.tpot_s}), attainment "
                    f"{lo_run.slo_attainment:.3f}",
                    "slo",
                )
            hi, lo = lo, lo / 2
    while hi - lo > rel_tol * lo:
        mid = (lo * hi) ** 0.5 if hi > 4 * lo else (lo + hi) / 2
        result, ok = run_at(mid)
        if ok:
            lo, lo_run = mid, result
        else:
            hi = mid
    return MaxRate(rate=lo, run=lo_run, rule=rule, target=target, runs=runs)
