"""The flow engine: a schedule's transfers as fluid flows sharing every link max-min fairly.

Every transfer is a flow of its bytes over the links of its route (``system.path``); the links
are the resources of a :class:`tlm.chip.bandwidth_sharing.FluidNetwork` with their
``bandwidth_Bps`` as capacities, so all the flows in flight at a moment - of one step or of
several steps that overlap - share each link max-min fairly, and the rates change only when a
flow starts or ends. A step starts when the steps it waits for have ended (at once if none);
its flows start together after the step's fixed cost: ``step_fixed_s`` plus the longest path
latency among its transfers, the analytic engine's ``fixed_s``. The step ends when its last
flow ends; the operation's time is the last end. Chunks are charged as the analytic engine
charges them. With ``hbm_Bps`` (the runtime's ranks) each chip's HBM is a resource, crossed
once per access (:mod:`tlm.collectives.hbm`). :class:`Launch` starts a schedule's steps in a
network someone else owns (the server model's, beside the chips' kernels: :func:`step_flows`
with ``split``); :class:`Flow` is a Launch on the system's own resources.

Against the analytic engine: equal where nothing contends, and always ``flow >= analytic`` (a
step starts no earlier, its busiest link moves its bytes no faster; docs/collectives.md).

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

from ..chip.bandwidth_sharing import FlowSet, FluidNetwork
from .analytic import Analytic
from .hbm import flow_hbm
from .schedule import Schedule

__all__ = ["Flow", "Launch", "StepFlows", "step_flows", "waiters_of"]


class StepFlows:
    """The flows of one step: per transfer, its flows ``(chunks, resources)``, ``chunks`` the
    flow's bytes in units of one chunk; and all of them as the network starts them, checked
    once (a :class:`~tlm.chip.bandwidth_sharing.FlowSet`, their chunks and transfers).

    Parameters
    ----------
    transfers : sequence of sequence of tuple
        Per transfer, its flows ``(chunks, resources)``.
    shared : dict, optional
        Flow sets already built, by their flows' resources: steps over the same routes (a
        ring's) share one (:func:`step_flows` passes one dict for a schedule).

    Attributes
    ----------
    transfers : tuple
    flows : FlowSet
        Every flow of the step, transfer by transfer.
    chunks : numpy.ndarray
        Per flow, its chunks (each >= 0).
    transfer : numpy.ndarray
        Per flow, the index of its transfer.
    """

    __slots__ = ("transfers", "flows", "chunks", "transfer")

    def __init__(self, transfers, shared=None):
        self.transfers = tuple(map(tuple, transfers))
        every = [flow for transfer in self.transfers for flow in transfer]
        count = len(self.transfers)
        self.transfer = np.repeat(np.arange(count), [len(t) for t in self.transfers])
        self.chunks = np.array([units for units, _ in every], dtype=float)
        bad = ~(self.chunks >= 0)
        if bad.any():
            raise ValueError(f"chunks must be numbers >= 0, not {self.chunks[bad][0].item()!r}")
        routes = tuple([tuple(path) for _, path in every])
        if shared is None:
            self.flows = FlowSet(routes)
        else:
            self.flows = shared.get(routes)
            if self.flows is None:
                self.flows = shared[routes] = FlowSet(routes)

    def __len__(self) -> int:
        return len(self.transfers)

    def __iter__(self):
        return iter(self.transfers)


def step_flows(schedule: Schedule, paths, split=None) -> list[StepFlows]:
    """The flows of every transfer of ``schedule``: per step, a :class:`StepFlows` (per
    transfer, a tuple of ``(chunks, resources)``, ``chunks`` the flow's bytes in units of one
    chunk).

    Parameters
    ----------
    schedule : Schedule
    paths : list of list of tuple of int
        Per step, per transfer: the links of its route (:attr:`Analytic.paths`).
    split : callable, optional
        ``split(transfer) -> [(fraction, before, after)]``: the transfer is several flows, each
        ``fraction`` of its chunks through the resources ``before + route + after`` (the
        server model's HBM stacks at either end). Without it, one flow over the route.
    """
    out, shared = [], {}
    for step, step_paths in zip(schedule.steps, paths, strict=True):
        flows = []
        for t, path in zip(step.transfers, step_paths, strict=True):
            if split is None:
                flows.append(((t.units, path),))
            else:
                flows.append(
                    tuple(
                        (t.units * fraction, (*before, *path, *after))
                        for fraction, before, after in split(t)
                    )
                )
        out.append(StepFlows(flows, shared))
    return out


def waiters_of(after) -> list[list[int]]:
    """Per step, the steps that wait for it (from each step's ``after``)."""
    waiters = [[] for _ in after]
    for i, before in enumerate(after):
        for a in before:
            waiters[a].append(i)
    return waiters


class Launch:
    """A schedule's steps running in a SimPy environment and a :class:`FluidNetwork`.

    Started at once (at ``env.now``): a step begins when the steps it waits for have ended,
    pays its fixed cost, then starts its flows together; it ends with its last flow.

    Parameters
    ----------
    env : simpy.Environment
    net : FluidNetwork
        Holds every resource the flows name (links, and whatever ``flows`` add).
    flows : list of StepFlows
        Per step, its flows (:func:`step_flows`; or per transfer, its flows ``(chunks,
        resources)``, made a :class:`StepFlows` here).
    after : list of tuple of int
        Per step, the steps it waits for.
    fixed_s : list of float
        Per step, the fixed cost before its flows start, in seconds.
    chunk_bytes : float
        Bytes of one chunk.
    waiters : list, optional
        :func:`waiters_of` ``after``, if already computed.
    record : list, optional
        When given, every flow is timed on its own and appended as ``(step, transfer,
        start_s, end_s, nbytes, resources)`` when it ends (one event per flow instead of one
        per step).

    Attributes
    ----------
    ends : list of float
        Per step, when it ended (0.0 until then).
    done : simpy.Event
        Fires when every step has ended.
    """

    def __init__(self, env, net, flows, after, fixed_s, chunk_bytes, waiters=None, record=None):
        self.env, self.net = env, net
        self.flows = [f if isinstance(f, StepFlows) else StepFlows(f) for f in flows]
        self.fixed_s, self.chunk_bytes, self.record = fixed_s, chunk_bytes, record
        self.waiters = waiters_of(after) if waiters is None else waiters
        self.waiting = [len(a) for a in after]
        self.ends = [0.0] * len(flows)
        self.left = len(flows)
        self.done = env.event()
        if not self.left:
            self.done.succeed()
        for i in range(len(flows)):
            if not self.waiting[i]:
                self._begin(i)

    def _finished(self, i):
        self.ends[i] = self.env.now
        self.left -= 1
        if not self.left:
            self.done.succeed()
        for j in self.waiters[i]:
            self.waiting[j] -= 1
            if not self.waiting[j]:
                self._begin(j)

    def _launch(self, i):
        step = self.flows[i]
        if not step.transfers:
            self._finished(i)
            return
        nbytes = step.chunks * self.chunk_bytes
        if self.record is None:
            done = self.net.start(step.flows, nbytes, together=True)
            done.callbacks.append(lambda _event: self._finished(i))
            return
        now = self.env.now
        specs = zip(step.transfer.tolist(), nbytes.tolist(), step.flows.resources, strict=True)
        events = self.net.start(step.flows, nbytes)
        left = [len(events)]

        def ended(_event, spec):
            self.record.append((i, spec[0], now, self.env.now, spec[1], spec[2]))
            left[0] -= 1
            if not left[0]:
                self._finished(i)

        for event, spec in zip(events, specs, strict=True):
            event.callbacks.append(lambda e, spec=spec: ended(e, spec))

    def _begin(self, i):
        timer = self.env.timeout(self.fixed_s[i])
        timer.callbacks.append(lambda _event: self._launch(i))


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
        hbm, split = flow_hbm(schedule, system)
        self.capacity.update(hbm or {})
        self.after = self.analytic.after
        self.fixed_s = self.analytic.fixed_s.tolist()
        self.flows = step_flows(schedule, self.analytic.paths, split)
        self.waiters = waiters_of(self.after)
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
        launch = Launch(env, net, self.flows, self.after, self.fixed_s, chunk_bytes, self.waiters)
        env.run()
        self.events = net.events
        return max(launch.ends, default=0.0)

    def time_s(self, size_bytes, itemsize: int) -> np.ndarray:
        """Time of the operation for each buffer size in ``size_bytes``, in seconds (one
        simulation per size)."""
        unit = self.analytic.chunk_bytes(np.atleast_1d(size_bytes), itemsize)
        return np.array([self.run(float(u)) for u in unit.tolist()])
