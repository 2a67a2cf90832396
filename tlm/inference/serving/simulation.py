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

from .checks import ServingInputError, check_int, check_positive
from .fleet import ROUTER_POLICIES, Colocated, Disaggregated, KvLink, Pools
from .metrics import ServingResult, Slo, serving_result
from .replica import Seq
from .requests import ClosedLoop, Poisson, Trace, Workload
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
            scheduler.prefill_policy(),
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
    engine,
    *,
    rate=None,
    duration_s=None,
    requests=None,
    prompt=512,
    output=128,
    trace=None,
    seed=0,
    concurrency=None,
    replicas=None,
    router="least_loaded",
    max_batch=128,
    token_budget=2048,
    prefill="chunked",
    admission="greedy",
    prefill_replicas=None,
    decode_replicas=None,
    decode_engine=None,
    kv_transfer_s=None,
    kv_bytes_per_token=None,
    link_bandwidth_Bps=None,
    link_latency_s=0.0,
    slo_ttft_s=None,
    slo_tpot_s=None,
    timeline=False,
) -> ServingResult:
    """Simulate serving a stream of requests on a fleet of model replicas (the keywords map
    onto the package's values: :class:`Scheduler`, :class:`Slo`, a fleet, a load)."""
    scheduler = Scheduler(max_batch, token_budget, prefill, admission)
    ROUTER_POLICIES.named(router)
    for name, value in (("slo_ttft_s", slo_ttft_s), ("slo_tpot_s", slo_tpot_s)):
        if value is not None:
            check_positive(name, value)
    slo = Slo(slo_ttft_s, slo_tpot_s)
    if prefill_replicas is not None or decode_replicas is not None:
        if replicas is not None:
            raise ServingInputError(
                "replicas",
                replicas,
                "None",
                f"replicas={replicas!r} is for a colocated fleet; a disaggregated one is "
                "prefill_replicas + decode_replicas",
            )
        if prefill_replicas is None or decode_replicas is None:
            raise ServingInputError(
                "decode_replicas",
                decode_replicas,
                "both",
                f"give both prefill_replicas and decode_replicas, not prefill_replicas="
                f"{prefill_replicas!r} and decode_replicas={decode_replicas!r}",
            )
        check_int("prefill_replicas", prefill_replicas, 1)
        check_int("decode_replicas", decode_replicas, 1)
        if kv_transfer_s is not None:
            if kv_bytes_per_token is not None or link_bandwidth_Bps is not None:
                raise ValueError(
                    "give either kv_transfer_s or kv_bytes_per_token with link_bandwidth_Bps, "
                    "not both"
                )
            transfer = kv_transfer_s
        else:
            if kv_bytes_per_token is None or link_bandwidth_Bps is None:
                raise ValueError(
                    "a disaggregated fleet needs kv_transfer_s, or kv_bytes_per_token and "
                    "link_bandwidth_Bps (and link_latency_s)"
                )
            check_positive("kv_bytes_per_token", kv_bytes_per_token)
            check_positive("link_bandwidth_Bps", link_bandwidth_Bps)
            check_positive("link_latency_s", link_latency_s, allow_zero=True)
            transfer = KvLink(kv_bytes_per_token, link_bandwidth_Bps, link_latency_s)
        fleet = Disaggregated(
            engine, prefill_replicas, decode_replicas, transfer, decode_engine, router
        )
    else:
        for name, value in (
            ("decode_engine", decode_engine),
            ("kv_transfer_s", kv_transfer_s),
            ("kv_bytes_per_token", kv_bytes_per_token),
            ("link_bandwidth_Bps", link_bandwidth_Bps),
        ):
            if value is not None:
                raise ValueError(
                    f"{name} is for a disaggregated fleet (prefill_replicas, decode_replicas)"
                )
        fleet = Colocated(engine, 1 if replicas is None else replicas, router)
    if concurrency is not None:
        check_int("concurrency", concurrency, 1)
        for name, value in (("rate", rate), ("duration_s", duration_s), ("trace", trace)):
            if value is not None:
                raise ValueError(
                    f"{name}={value!r} must not be given with concurrency={concurrency} (closed "
                    "loop: each client sends its next request when its last one completes; "
                    "give requests)"
                )
        if requests is None:
            raise ValueError(
                f"requests (an integer >= 1) is required with concurrency={concurrency}: the "
                "requests the clients send in all"
            )
        check_int("requests", requests, 1)
        load = ClosedLoop(concurrency, requests, Workload(prompt, output, seed))
    elif trace is not None:
        for name, value in (("rate", rate), ("duration_s", duration_s), ("requests", requests)):
            if value is not None:
                raise ValueError(f"{name} must not be given with a trace (it has {name!r})")
        load = Trace(trace)
    else:
        if rate is None:
            raise ValueError("rate (requests per second, > 0) is required without a trace")
        load = Poisson(rate, requests, duration_s, Workload(prompt, output, seed))
    drawn = load.draw()
    sim = Simulation(fleet, drawn, load.driver(), scheduler, timeline)
    sim.run()
    return serving_result(sim, sim.pools.replicas, fleet.chips, drawn.seed, slo)
