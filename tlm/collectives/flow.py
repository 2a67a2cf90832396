"""The flow engine: a schedule's transfers as fluid flows sharing every link max-min fairly.

Every transfer is a flow of its bytes over the links of its route (``system.path``); the links
are the resources of a :class:`tlm.chip.bandwidth_sharing.FluidNetwork` with their
``bandwidth_Bps`` as capacities, so all the flows in flight at a moment - of one step or of
several steps that overlap - share each link max-min fairly, and the rates change only when a
flow starts or ends. A step starts when the steps it waits for have ended (at once if none);
its flows start together after the step's fixed cost: ``step_fixed_s`` plus the longest path
latency among its transfers, the analytic engine's ``fixed_s`` (reused, not restated). The step
ends when its last flow ends; the operation's time is the last end. Chunks are charged as the
analytic engine charges them, the largest chunk (``Schedule.unit_elements``), so the two
engines compare figure for figure.

How it relates to the analytic engine (tests/test_tlm_collectives_flow.py checks each):

* where nothing contends (each step's flows cross disjoint links, or share links only with
  flows that end together, and no two steps overlap on a link) the two are equal;
* always ``flow >= analytic``: a step's flows cannot start earlier than the analytic start
  (by induction over the steps), and its busiest link cannot move the step's bytes faster
  than its bandwidth - the analytic charge. The flow engine is slower when overlapping steps
  share links, or if a step's busiest link idles while its flows are held back elsewhere.

Examples
--------
>>> from tlm.collectives import Analytic, build
>>> from tlm.system import load_system
>>> server = load_system("trn2-server")
>>> ring = build("ring", "all_reduce", server)
>>> flow = Flow(ring, server)
>>> t = float(flow.time_s([1 << 30], itemsize=2)[0])  # 1 GiB of bf16: no link is shared
>>> round(t * 1e3, 3), flow.events                    # ms; one rate change a step
(7.909, 30)
>>> abs(t / float(Analytic(ring, server).time_s([1 << 30], 2)[0]) - 1) < 1e-9
True
"""

from __future__ import annotations

import numbers

import numpy as np
import simpy

from ..chip.bandwidth_sharing import FluidNetwork
from .analytic import Analytic
from .schedule import Schedule

__all__ = ["Flow"]


class Flow:
    """The flow model of one schedule on one system.

    Parameters
    ----------
    schedule : Schedule
    system : tlm.system.System
        The system whose chips ``schedule.chips`` names; its links carry the flows.
    analytic : Analytic, optional
        The schedule's analytic engine on ``system`` if already built: its routes and fixed
        costs are reused.

    Attributes
    ----------
    events : int
        Rate changes (FluidNetwork timer events) of the last :meth:`run`.
    """

    def __init__(self, schedule: Schedule, system, analytic: Analytic | None = None):
        self.analytic = analytic if analytic is not None else Analytic(schedule, system)
        self.schedule = schedule
        self.system = system
        self.capacity = {i: float(b) for i, b in enumerate(system.bandwidth_Bps)}
        self.after = self.analytic.after
        self.fixed_s = self.analytic.fixed_s.tolist()
        # per step: the chunks of each transfer and its route
        self.flows = [
            [(t.units, path) for t, path in zip(step.transfers, paths, strict=True)]
            for step, paths in zip(schedule.steps, self.analytic.paths, strict=True)
        ]
        self.waiters = [[] for _ in schedule.steps]  # steps waiting for each step
        for i, after in enumerate(self.after):
            for a in after:
                self.waiters[a].append(i)
        self.events = 0
        # rates by the flows in flight, kept across runs: the flows' routes are the same at
        # every size, only their bytes (so the moments the rates change) differ
        self._memo: dict = {}

    def run(self, chunk_bytes: float) -> float:
        """Time of the operation when every chunk is ``chunk_bytes`` bytes, in seconds.

        Parameters
        ----------
        chunk_bytes : float
            Bytes of one chunk (>= 0).
        """
        if (
            isinstance(chunk_bytes, bool)
            or not isinstance(chunk_bytes, numbers.Real)
            or not chunk_bytes >= 0
        ):
            raise ValueError(f"chunk_bytes must be a number >= 0, not {chunk_bytes!r}")
        env = simpy.Environment()
        net = FluidNetwork(env, self.capacity, record=False, memo=self._memo)
        steps = len(self.flows)
        waiting = [len(a) for a in self.after]
        ends = [0.0] * steps

        def finished(i):
            ends[i] = env.now
            for j in self.waiters[i]:
                waiting[j] -= 1
                if not waiting[j]:
                    begin(j)

        def launch(i):
            flows = self.flows[i]
            if not flows:
                finished(i)
                return
            done = net.transfers([(units * chunk_bytes, path) for units, path in flows], True)
            done.callbacks.append(lambda _event: finished(i))

        def begin(i):
            timer = env.timeout(self.fixed_s[i])
            timer.callbacks.append(lambda _event: launch(i))

        for i in range(steps):
            if not waiting[i]:
                begin(i)
        env.run()
        self.events = net.events
        return max(ends, default=0.0)

    def time_s(self, size_bytes, itemsize: int) -> np.ndarray:
        """Time of the operation for each buffer size in ``size_bytes``, in seconds (one
        simulation per size)."""
        unit = self.analytic.chunk_bytes(np.atleast_1d(size_bytes), itemsize)
        return np.array([self.run(float(u)) for u in unit.tolist()])
