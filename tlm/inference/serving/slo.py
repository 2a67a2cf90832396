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
``c / 1000``: :class:`SloUnreachable`) - starting high because low rates are the slow runs
(each request alone, an iteration per token). Then bisection (geometric while the bracket
spans more than 4x) until the bracket is within ``rel_tol`` of its lower end.
"""

from __future__ import annotations

import abc
import math
import numbers
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from .checks import Registry, ServingInputError, check_int, check_positive
from .metrics import ServingResult
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


class SloUnreachable(ValueError):
    """No arrival rate meets the SLO: even a lone request misses it (the figures say by how
    much)."""


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
        raise ServingInputError("target", target, "a fraction in (0, 1]")
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
    engine,
    *,
    slo_ttft_s=None,
    slo_tpot_s=None,
    rule="attainment",
    target=0.9,
    requests=2000,
    rel_tol=0.02,
    max_runs=40,
    **kwargs,
) -> MaxRate:
    """The highest Poisson arrival rate a fleet serves within an SLO (see the module)."""
    judge = SLO_RULES.named(rule)()
    _check_target(target)
    if slo_ttft_s is None and slo_tpot_s is None:
        raise ValueError("max_rate needs slo_ttft_s or slo_tpot_s (or both)")
    rel_tol = check_positive("rel_tol", rel_tol)
    max_runs = check_int("max_runs", max_runs, 3)
    for name in ("rate", "duration_s", "trace", "concurrency"):
        if name in kwargs:
            raise ValueError(f"max_rate chooses the rate itself; do not pass {name}")
    runs = []

    def run_at(rate):
        if len(runs) >= max_runs:
            raise RuntimeError(
                f"max_rate: {max_runs} simulations did not narrow the bracket to "
                f"rel_tol={rel_tol} (runs: {runs})"
            )
        result = simulate(
            engine,
            rate=rate,
            requests=requests,
            slo_ttft_s=slo_ttft_s,
            slo_tpot_s=slo_tpot_s,
            **kwargs,
        )
        metric = judge.excess(result, target)
        runs.append((rate, metric <= 0, metric))
        return result, metric <= 0

    # capacity: every request at (almost) once
    saturated, _ = run_at(1e9)
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
                    f"{capacity:.4g}/s) TTFT p90 {lo_run.ttft_s.p90:.4g} s (SLO {slo_ttft_s}), "
                    f"TPOT p90 {lo_run.tpot_s.p90:.4g} s (SLO {slo_tpot_s}), attainment "
                    f"{lo_run.slo_attainment:.3f}"
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
