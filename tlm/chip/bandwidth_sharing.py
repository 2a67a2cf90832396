"""Bandwidth shared by concurrent flows: a fluid model with max-min fair rates.

Resources (a core's DMA engines, an HBM stack; later, links) have capacities in bytes per
second. Each flow moves a number of bytes through a set of resources, with its own rate cap or
none. Whenever a flow starts or ends, the rates are recomputed by progressive filling: every
unfrozen flow's rate grows equally until a resource is full or a flow reaches its cap, and so
on. This is the standard max-min fair share; between changes each flow moves at a constant
rate, so the model needs only two events per flow.
"""

from __future__ import annotations

import math
import numbers

import simpy

__all__ = ["FluidNetwork"]

#: A flow with fewer bytes than this left is complete (rounding of rate x time).
_EPS_BYTES = 1e-3


def _number(value) -> bool:
    # the exact-type test first: the abstract-class check costs ~1 us a flow
    return type(value) in (float, int) or (
        not isinstance(value, bool) and isinstance(value, numbers.Real)
    )


def _positive(value) -> bool:
    return _number(value) and value > 0


class FluidNetwork:
    """Resources with capacities (bytes/s) shared max-min fairly by flows.

    Parameters
    ----------
    env : simpy.Environment
    capacities_Bps : dict
        ``{resource name: capacity in bytes per second}``, each positive and finite.
    record : bool
        Keep :attr:`history` (default); off, a network of many resources (a system's links)
        saves building a dict of every resource at every change of rates.
    memo : dict, optional
        Rates already computed, by the flows in flight (their resources and caps, in order of
        start): a dict kept across runs that start the same flows (a collective schedule at
        another size) makes every rate computation after the first a look-up. The rates are
        the same floats either way.

    Examples
    --------
    >>> import simpy
    >>> env = simpy.Environment()
    >>> net = FluidNetwork(env, {"hbm": 100.0})
    >>> a = net.transfer(100.0, ["hbm"], cap_Bps=1e9)
    >>> b = net.transfer(100.0, ["hbm"], cap_Bps=1e9)
    >>> env.run()
    >>> env.now   # two flows of 100 bytes share 100 B/s: both end at t = 2 s
    2.0
    >>> c = net.transfer(100.0, ["hbm"], cap_Bps=25.0)  # capped at 25 B/s: the other gets 75
    >>> d = net.transfer(300.0, ["hbm"])                # no cap of its own
    >>> env.run()
    >>> env.now   # both take 4 s more
    6.0
    """

    def __init__(
        self, env: simpy.Environment, capacities_Bps: dict, record: bool = True, memo=None
    ):
        for name, capacity in capacities_Bps.items():
            if not _positive(capacity) or math.isinf(capacity):
                raise ValueError(
                    f"capacity of {name!r} must be a positive finite number of bytes/s, "
                    f"not {capacity!r}"
                )
        self.env = env
        self.capacity = dict(capacities_Bps)
        self.flows: dict[int, list] = {}  # id -> [remaining, rate, resources, cap, event or group]
        self.bytes_by_resource = {name: 0.0 for name in self.capacity}
        self._last = 0.0
        self._generation = 0
        self._next_id = 0
        self.events = 0
        #: ``(time_s, {resource: bytes/s in use})`` after every change of rates.
        self.history: list = []
        self.record = record
        self.memo = memo

    def transfer(self, nbytes: float, resources, cap_Bps: float = math.inf) -> simpy.Event:
        """Start a flow now; the returned event fires when its last byte has moved.

        Parameters
        ----------
        nbytes : float
            Bytes to move (>= 0; 0 completes at once).
        resources : sequence of str
            The resources the flow goes through; it takes the same rate from each.
        cap_Bps : float
            The flow's own limit in bytes per second (default: none); without resources a
            flow needs one.
        """
        return self.transfers([(nbytes, resources, cap_Bps)])[0]

    def transfers(self, flows, together: bool = False):
        """Start several flows now, the rates recomputed once (not once per flow).

        Parameters
        ----------
        flows : iterable of tuple
            ``(nbytes, resources)`` or ``(nbytes, resources, cap_Bps)``, as :meth:`transfer`
            takes them.
        together : bool
            Return one event for all the flows (fires when the last ends) instead of one
            per flow: a thousand flows cost one event, not a thousand.

        Returns
        -------
        list of simpy.Event, or simpy.Event when ``together``
            Per flow in order (or for all): fires when the last byte has moved.
        """
        checked = []
        capacity = self.capacity
        for flow in flows:
            nbytes, resources = flow[0], flow[1]
            cap = len(flow) > 2
            cap_Bps = flow[2] if cap else math.inf
            for name in resources:
                if name not in capacity:
                    known = ", ".join(map(str, capacity))
                    raise ValueError(f"resources must be among {known}, not {name!r}")
            if not _number(nbytes) or not nbytes >= 0:
                raise ValueError(f"nbytes must be a number >= 0, not {nbytes!r}")
            if (cap and not _positive(cap_Bps)) or (math.isinf(cap_Bps) and not resources):
                raise ValueError(
                    "cap_Bps must be a positive number of bytes/s (finite for a flow through no "
                    f"resource), not {cap_Bps!r}"
                )
            checked.append((nbytes, tuple(resources), cap_Bps))
        self._advance()
        events, started = [], False
        # a flow's tag: its own event, or the group [flows left, event] of a batch together
        group = [0, self.env.event()] if together else None
        for nbytes, resources, cap_Bps in checked:
            for name in resources:
                self.bytes_by_resource[name] += nbytes
            if together:
                if nbytes > 0:
                    group[0] += 1
                    started = True
                    self.flows[self._next_id] = [float(nbytes), 0.0, resources, cap_Bps, group]
                    self._next_id += 1
                continue
            done = self.env.event()
            events.append(done)
            if nbytes <= 0:
                done.succeed()
                continue
            self.flows[self._next_id] = [float(nbytes), 0.0, resources, cap_Bps, done]
            self._next_id += 1
            started = True
        if together and not group[0]:
            group[1].succeed()
        if started:
            self._reschedule()
        return group[1] if together else events

    def _advance(self):
        dt = self.env.now - self._last
        if dt > 0:
            for flow in self.flows.values():
                flow[0] -= flow[1] * dt
        self._last = self.env.now

    def _rates(self):
        if self.memo is None:
            self._fill()
            return
        key = tuple([(flow[2], flow[3]) for flow in self.flows.values()])
        rates = self.memo.get(key)
        if rates is None:
            self._fill()
            self.memo[key] = [flow[1] for flow in self.flows.values()]
        else:
            for flow, rate in zip(self.flows.values(), rates, strict=True):
                flow[1] = rate

    def _fill(self):
        # progressive filling over the flow records themselves (no id lookups: this loop is
        # the flow engine's inner loop, thousands of flows on hundreds of links)
        unfrozen = list(self.flows.values())
        for flow in unfrozen:
            flow[1] = 0.0
        capacity = self.capacity
        left = {}  # capacity not yet given, of the resources in use
        for flow in unfrozen:
            for name in flow[2]:
                left[name] = capacity[name]
        while unfrozen:
            users = {}
            for flow in unfrozen:
                for name in flow[2]:
                    users[name] = users.get(name, 0) + 1
            step = min(flow[3] - flow[1] for flow in unfrozen)
            for name, count in users.items():
                share = left[name] / count
                if share < step:
                    step = share
            step = max(step, 0.0)
            for flow in unfrozen:
                flow[1] += step
            full = set()
            for name, count in users.items():
                left[name] -= step * count
                if left[name] <= 1e-9 * capacity[name]:
                    full.add(name)
            keep = [
                flow
                for flow in unfrozen
                if flow[1] < flow[3] * (1 - 1e-12) and full.isdisjoint(flow[2])
            ]
            if len(keep) == len(unfrozen):  # numerical safety: nothing saturated, stop filling
                break
            unfrozen = keep

    def _reschedule(self):
        for fid in [f for f, flow in self.flows.items() if flow[0] <= _EPS_BYTES]:
            tag = self.flows.pop(fid)[4]
            if type(tag) is list:
                tag[0] -= 1
                if not tag[0]:
                    tag[1].succeed()
            else:
                tag.succeed()
        self._generation += 1
        if not self.flows:
            self._log()
            return
        self._rates()
        self._log()
        wait = min(flow[0] / flow[1] for flow in self.flows.values() if flow[1] > 0)
        generation = self._generation
        timer = self.env.timeout(wait)
        timer.callbacks.append(lambda _event: self._wake(generation))
        self.events += 1

    def _log(self):
        if not self.record:
            return
        use = dict.fromkeys(self.capacity, 0.0)
        for flow in self.flows.values():
            for name in flow[2]:
                use[name] += flow[1]
        if self.history and self.history[-1][0] == self.env.now:
            self.history[-1] = (self.env.now, use)
        else:
            self.history.append((self.env.now, use))

    def _wake(self, generation):
        if generation != self._generation:
            return
        self._advance()
        # the flow(s) due now may have a few bytes left from rounding: finish them
        for flow in self.flows.values():
            if flow[1] > 0 and flow[0] / flow[1] <= 1e-15 + 1e-12 * self.env.now:
                flow[0] = 0.0
        self._reschedule()
