"""The simulation: a load's requests through a fleet, on SimPy, to a :class:`ServingResult`.

:class:`Simulation` is the ledger of one run: the SimPy environment, every request's times,
rejections and preemptions, and the number in the system. A request reaches the scheduler
``fleet.request_fixed_s`` after it arrives (the serving stack's receiving, tokenising and
queueing of it, lumped before its first iteration); it is in the system, and its latencies
count, from its arrival, while the replicas serve others.
"""

from __future__ import annotations

import numpy as np
import simpy

from ..errors import InferenceInputError
from .fleet import Fleet, Pools
from .metrics import ServingResult, Slo, serving_result
from .replica import Seq
from .requests import Load
from .scheduling import Scheduler

__all__ = ["Simulation", "simulate"]


class Simulation:
    """One run: ``fleet`` serving ``requests`` (:class:`~.requests.Requests`) brought by
    ``driver`` (:meth:`~.requests.Load.driver`) under ``scheduler``; :meth:`run` it."""

    def __init__(self, fleet, requests, driver, scheduler, timeline: bool = False):
        self.env = simpy.Environment()
        self.arrival, self.prompt, self.output, _ = requests
        n = len(self.arrival)
        self.first_s = np.full(n, np.nan)
        self.finish_s = np.full(n, np.nan)
        self.replica_of = np.full(n, -1, np.int64)
        self.rejected = np.zeros(n, bool)
        self.preempted = np.zeros(n, np.int64)
        self.reasons: dict = {}
        self.request_delay = fleet.request_fixed_s
        self.timeline = [] if timeline else None
        self.pools = Pools(
            fleet,
            self.env,
            scheduler.prefill_policy(requests),
            scheduler.admission_rule(),
            self,
            self.timeline,
        )
        self.in_system = 0
        self.in_area = 0.0
        self.in_t = 0.0
        self.window_area = 0.0
        self.completed = 0
        self.driver = driver
        driver.start(self)

    def _mark(self):
        now = self.env.now
        self.in_area += self.in_system * (now - self.in_t)
        self.in_t = now

    def arrive(self, rid: int) -> bool:
        """Request ``rid`` arrives now: rejected (False) or on its way to a replica (True)."""
        prompt, output = int(self.prompt[rid]), int(self.output[rid])
        reason = self.pools.rejection(prompt, output)
        if reason is not None:
            self.rejected[rid] = True
            self.reasons[reason] = self.reasons.get(reason, 0) + 1
        else:
            self._mark()
            self.in_system += 1
            seq = Seq(rid, prompt, output)
            if self.request_delay > 0:
                self.env.timeout(self.request_delay).callbacks.append(lambda _: self._queue(seq))
            else:
                self._queue(seq)
        if rid == len(self.arrival) - 1:
            self._mark()
            self.window_area = self.in_area
        return reason is None

    def _queue(self, seq: Seq) -> None:
        """``seq`` reaches the scheduler: a replica of the front pool queues it."""
        self.replica_of[seq.rid] = self.pools.route(seq).index

    def first_token(self, seq: Seq) -> None:
        self.first_s[seq.rid] = self.env.now

    def finish(self, seq: Seq) -> None:
        self._mark()
        self.in_system -= 1
        self.completed += 1
        self.finish_s[seq.rid] = self.env.now
        self.driver.completed(self)

    def run(self) -> None:
        self.env.run()
        if self.completed + int(self.rejected.sum()) != len(self.arrival):
            raise RuntimeError(
                f"serving simulation stopped with {len(self.arrival) - self.completed} of "
                f"{len(self.arrival)} requests unfinished (a scheduler bug)"
            )


def simulate(
    fleet: Fleet,
    load: Load,
    scheduler: Scheduler = Scheduler(),
    slo: Slo = Slo(),
    *,
    timeline: bool = False,
) -> ServingResult:
    """Simulate serving a load's requests on a fleet of model replicas.

    Parameters
    ----------
    fleet : Colocated or Disaggregated
        The replicas, their engines and routers (:mod:`~tlm.inference.serving.fleet`).
    load : Poisson, Trace or ClosedLoop
        The requests and how they arrive (:mod:`~tlm.inference.serving.requests`).
    scheduler : Scheduler
        Batch limits, prefill policy, admission rule.
    slo : Slo
        The SLO of ``slo_attainment`` (NaN without one).
    timeline : bool
        Keep one row per iteration (``ServingResult.timeline``).

    Returns
    -------
    ServingResult

    Raises
    ------
    InferenceInputError
        An argument of the wrong type (the values check their own fields when built).
    TraceError
        A trace file that cannot be read.
    ValueError
        An engine's ``iteration_s`` or a ``kv_transfer_s`` returning bad seconds.

    Examples
    --------
    >>> from tlm.inference.serving import ClosedLoop, Colocated, Workload
    >>> class Linear:                      # 10 ms an iteration + 1 ms a token
    ...     chips, kv_capacity_tokens, block_tokens = 1, 4096, 16
    ...     def iteration_s(self, tokens, sequences, kv_tokens, pairs):
    ...         return 0.010 + 0.001 * tokens
    >>> load = ClosedLoop(concurrency=1, requests=2, workload=Workload(prompt=100, output=11))
    >>> run = simulate(Colocated(Linear()), load, Scheduler(token_budget=256))
    >>> r = run.per_request                # back to back, 0.22 s each
    >>> r["arrival_s"].round(6).tolist(), r["e2e_s"].round(6).tolist()
    ([0.0, 0.22], [0.22, 0.22])
    """
    for name, value, kind, what in (
        ("fleet", fleet, Fleet, "a Colocated or Disaggregated fleet"),
        ("load", load, Load, "a Poisson, Trace or ClosedLoop load"),
        ("scheduler", scheduler, Scheduler, "a Scheduler"),
        ("slo", slo, Slo, "an Slo"),
    ):
        if not isinstance(value, kind):
            raise InferenceInputError(name, value, what)
    drawn = load.draw()
    sim = Simulation(fleet, drawn, load.driver(), scheduler, timeline)
    sim.run()
    return serving_result(sim, sim.pools.replicas, fleet.chips, drawn.seed, slo)
