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


def _positive(value) -> bool:
    return not isinstance(value, bool) and isinstance(value, numbers.Real) and value > 0


class FluidNetwork:
    """Resources with capacities (bytes/s) shared max-min fairly by flows.

    Parameters
    ----------
    env : simpy.Environment
    capacities_Bps : dict
        ``{resource name: capacity in bytes per second}``, each positive and finite.

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

    def __init__(self, env: simpy.Environment, capacities_Bps: dict):
        for name, capacity in capacities_Bps.items():
            if not _positive(capacity) or math.isinf(capacity):
                raise ValueError(
                    f"capacity of {name!r} must be a positive finite number of bytes/s, "
                    f"not {capacity!r}"
                )
        self.env = env
        self.capacity = dict(capacities_Bps)
        self.flows: dict[int, list] = {}  # id -> [remaining, rate, resources, cap, event]
        self.bytes_by_resource = {name: 0.0 for name in self.capacity}
        self._last = 0.0
        self._generation = 0
        self._next_id = 0
        self.events = 0
        #: ``(time_s, {resource: bytes/s in use})`` after every change of rates.
        self.history: list = []

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
        for name in resources:
            if name not in self.capacity:
                known = ", ".join(self.capacity)
                raise ValueError(f"resources must be among {known}, not {name!r}")
        if isinstance(nbytes, bool) or not isinstance(nbytes, numbers.Real) or not nbytes >= 0:
            raise ValueError(f"nbytes must be a number >= 0, not {nbytes!r}")
        if not _positive(cap_Bps) or (math.isinf(cap_Bps) and not resources):
            raise ValueError(
                "cap_Bps must be a positive number of bytes/s (finite for a flow through no "
                f"resource), not {cap_Bps!r}"
            )
        done = self.env.event()
        self._advance()
        for name in resources:
            self.bytes_by_resource[name] += nbytes
        if nbytes <= 0:
            done.succeed()
            return done
        self.flows[self._next_id] = [float(nbytes), 0.0, tuple(resources), cap_Bps, done]
        self._next_id += 1
        self._reschedule()
        return done

    def _advance(self):
        dt = self.env.now - self._last
        if dt > 0:
            for flow in self.flows.values():
                flow[0] -= flow[1] * dt
        self._last = self.env.now

    def _rates(self):
        flows = self.flows
        for flow in flows.values():
            flow[1] = 0.0
        unfrozen = set(flows)
        left = dict(self.capacity)
        while unfrozen:
            users = {}
            for fid in unfrozen:
                for name in flows[fid][2]:
                    users[name] = users.get(name, 0) + 1
            step = min(flows[fid][3] - flows[fid][1] for fid in unfrozen)
            for name, count in users.items():
                step = min(step, left[name] / count)
            step = max(step, 0.0)
            full = set()
            for fid in unfrozen:
                flows[fid][1] += step
            for name, count in users.items():
                left[name] -= step * count
                if left[name] <= 1e-9 * self.capacity[name]:
                    full.add(name)
            frozen = {
                fid
                for fid in unfrozen
                if flows[fid][1] >= flows[fid][3] * (1 - 1e-12) or full.intersection(flows[fid][2])
            }
            if not frozen:  # numerical safety: nothing saturated, stop filling
                break
            unfrozen -= frozen

    def _reschedule(self):
        for fid in [f for f, flow in self.flows.items() if flow[0] <= _EPS_BYTES]:
            self.flows.pop(fid)[4].succeed()
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
