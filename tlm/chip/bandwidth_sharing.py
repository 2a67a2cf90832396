"""Bandwidth shared by concurrent flows: a fluid model with max-min fair rates.

Resources (a core's DMA engines, an HBM stack; later, links) have capacities in bytes per
second. Each flow moves a number of bytes through a set of resources, with its own rate cap or
none. Whenever a flow starts or ends, the rates are recomputed by progressive filling: every
unfrozen flow's rate grows equally until a resource is full or a flow reaches its cap, and so
on. This is the standard max-min fair share; between changes each flow moves at a constant
rate, so the model needs only two events per flow.

The flows in flight are held in arrays (bytes left, rates, caps, the resources each crosses):
advancing them, finding the next to end, retiring the ended and filling are a few numpy
operations whatever their number, each element computed as a flow-by-flow loop would (the same
floats). A :class:`FlowSet` - the resources and caps of flows started together, checked once -
lets a caller that starts the same flows many times (a collective's steps, at every size) start
them with :meth:`FluidNetwork.start`, without checking each flow again.
"""

from __future__ import annotations

import collections
import itertools
import math
import numbers

import numpy as np
import simpy

__all__ = ["FlowSet", "FluidNetwork"]

#: A flow with fewer bytes than this left is complete (rounding of rate x time).
_EPS_BYTES = 1e-3
#: A flow whose rate is within this factor of its cap is frozen at its cap.
_AT_CAP = 1 - 1e-12


def _number(value) -> bool:
    # the exact-type test first: the abstract-class check costs ~1 us a flow
    return type(value) in (float, int) or (
        not isinstance(value, bool) and isinstance(value, numbers.Real)
    )


def _positive(value) -> bool:
    return _number(value) and value > 0


def _cap_error(cap_Bps) -> ValueError:
    return ValueError(
        "cap_Bps must be a positive number of bytes/s (finite for a flow through no "
        f"resource), not {cap_Bps!r}"
    )


class FlowSet:
    """The resources and rate caps of flows started together, checked once.

    Equal flow sets (the same resources and caps, flow by flow) hash alike: a
    :class:`FluidNetwork`'s ``memo`` knows the flows in flight by them.

    Parameters
    ----------
    resources : sequence of sequence
        Per flow, the names of the resources it goes through (checked against a network's
        resources when it starts them).
    cap_Bps : sequence of float, optional
        Per flow, its own limit in bytes per second (default: none); a flow through no
        resource needs a finite one.

    Raises
    ------
    ValueError
        For a cap that is not a positive number, an infinite one on a flow through no
        resource, or not one cap per flow.

    Examples
    --------
    >>> flows = FlowSet([["hbm"], ["hbm", "dma"]], cap_Bps=[25.0, math.inf])
    >>> len(flows), flows.names
    (2, ('hbm', 'dma'))
    >>> flows == FlowSet([("hbm",), ("hbm", "dma")], [25, math.inf])
    True
    """

    __slots__ = (
        "resources",
        "cap_Bps",
        "names",
        "_caps",
        "_every",
        "_entry_name",
        "_entry_flow",
        "_hash",
    )

    def __init__(self, resources, cap_Bps=None):
        resources = tuple(map(tuple, resources))
        if cap_Bps is None:
            caps = (math.inf,) * len(resources)
            if not all(resources):
                raise _cap_error(math.inf)
        else:
            caps = tuple(cap_Bps)
            if len(caps) != len(resources):
                raise ValueError(
                    f"cap_Bps must give one cap per flow ({len(resources)}), not {len(caps)}"
                )
            for names, cap in zip(resources, caps, strict=True):
                if not _positive(cap) or (math.isinf(cap) and not names):
                    raise _cap_error(cap)
        self._build(resources, caps)

    @classmethod
    def _checked(cls, resources: tuple, caps: tuple) -> FlowSet:
        """A flow set of tuples already checked (:meth:`FluidNetwork.transfers`)."""
        flows = cls.__new__(cls)
        flows._build(resources, caps)
        return flows

    def _build(self, resources, caps):
        count = len(resources)
        every = list(itertools.chain.from_iterable(resources))
        self.resources, self.cap_Bps, self.names = resources, caps, tuple(dict.fromkeys(every))
        local = {name: i for i, name in enumerate(self.names)}
        self._caps = np.array(caps, dtype=float)
        self._every = np.arange(count, dtype=np.intp)
        # the incidence of flows and resources, flow by flow: entry k is flow _entry_flow[k]
        # through resource names[_entry_name[k]]
        self._entry_name = np.fromiter(map(local.__getitem__, every), np.intp, len(every))
        self._entry_flow = np.repeat(self._every, np.fromiter(map(len, resources), np.intp, count))
        self._hash = hash((resources, caps))

    def __len__(self) -> int:
        return len(self.resources)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other) -> bool:
        if self is other:
            return True
        if not isinstance(other, FlowSet):
            return NotImplemented
        return (
            self._hash == other._hash
            and self.resources == other.resources
            and self.cap_Bps == other.cap_Bps
        )

    def __repr__(self) -> str:
        return f"FlowSet({len(self)} flows through {len(self.names)} resources)"


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
        Rates already computed, by the flows in flight (their flow sets, and which of each
        are still in flight, in order of start): a dict kept across runs that start the same
        flows (a collective schedule at another size) makes every rate computation after the
        first a look-up. The rates are the same floats either way.

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
    >>> flows = FlowSet([["hbm"], ["hbm"]])             # checked once, started many times
    >>> done = net.start(flows, [50.0, 150.0], together=True)
    >>> env.run()
    >>> env.now   # 50 B/s each for 1 s, then 100 B left alone
    8.0
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
        self._names = list(self.capacity)
        self._index = {name: i for i, name in enumerate(self._names)}
        self._capacity = np.array([float(c) for c in self.capacity.values()])
        self._bytes = np.zeros(len(self._names))
        # the flows in flight, in order of start: bytes left, rate, cap, tag (their event's
        # key in _tags), index in their flow set; and the resources they cross, flow by flow
        self._left = np.zeros(0)
        self._rate = np.zeros(0)
        self._cap = np.zeros(0)
        self._tag = np.zeros(0, dtype=np.intp)
        self._within = np.zeros(0, dtype=np.intp)
        self._entry_resource = np.zeros(0, dtype=np.intp)
        self._entry_flow = np.zeros(0, dtype=np.intp)
        self._dropped: list = []  # flows kept at each retirement since, not yet in the incidence
        self._moving = None  # which flows have a rate > 0, None when all
        # per flow set started, in order: [flow set, its flows in flight, its part of the key]
        self._batches: list = []
        self._sets: dict = {}  # the flow sets of transfers(), by their routes and caps
        self._resolved: dict = {}  # per flow set started here, its entries' resources' indices
        self._tags: dict = {}  # tag -> [flows in flight, the event they fire together]
        self._next_tag = 0
        self._last = 0.0
        self._generation = 0
        self.events = 0
        #: ``(time_s, {resource: bytes/s in use})`` after every change of rates.
        self.history: list = []
        self.record = record
        self.memo = memo
        # without a memo of the caller's, one of this network's own: the flows in flight
        # recur (a kernel's queues repeat their transfers), and a look-up costs less than a fill
        self._memo = {} if memo is None else memo

    @property
    def bytes_by_resource(self) -> dict:
        """``{resource: bytes}`` the flows started so far move through each resource."""
        return dict(zip(self._names, self._bytes.tolist(), strict=True))

    @property
    def flows(self) -> list:
        """The flows in flight, in order of start: ``(bytes left, rate_Bps, resources,
        cap_Bps)`` each, as of the last change of rates."""
        routes, at = [], 0
        for flows, count, _ in self._batches:
            routes += [
                (flows.resources[k], flows.cap_Bps[k]) for k in self._within[at : at + count]
            ]
            at += count
        return [
            (left, rate, resources, cap)
            for left, rate, (resources, cap) in zip(
                self._left.tolist(), self._rate.tolist(), routes, strict=True
            )
        ]

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
        sizes, routes, caps = [], [], []
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
                raise _cap_error(cap_Bps)
            sizes.append(float(nbytes))
            routes.append(tuple(resources))
            caps.append(cap_Bps)
        # one flow set for the same routes and caps: the memo's keys then compare by identity
        shape = (tuple(routes), tuple(caps))
        flowset = self._sets.get(shape)
        if flowset is None:
            flowset = self._sets[shape] = FlowSet._checked(*shape)
        return self._start(flowset, np.array(sizes, dtype=float), together)

    def start(self, flows: FlowSet, nbytes, together: bool = False):
        """Start the flows of a :class:`FlowSet` now, ``nbytes[i]`` bytes through flow ``i``'s
        resources: :meth:`transfers` without checking each flow again.

        Parameters
        ----------
        flows : FlowSet
        nbytes : array_like of float
            Bytes of each flow (>= 0; 0 completes at once).
        together : bool
            One event for all the flows, as :meth:`transfers` takes it.

        Returns
        -------
        list of simpy.Event, or simpy.Event when ``together``

        Raises
        ------
        ValueError
            For bytes that are not one number >= 0 a flow, or resources this network does
            not have.
        """
        if not isinstance(flows, FlowSet):
            raise TypeError(f"flows must be a FlowSet, not {type(flows).__name__}")
        sizes = np.asarray(nbytes, dtype=float)
        if sizes.shape != (len(flows),):
            raise ValueError(
                f"nbytes must give one size per flow ({len(flows)}), not shape {sizes.shape}"
            )
        bad = ~(sizes >= 0)
        if bad.any():
            raise ValueError(f"nbytes must be numbers >= 0, not {sizes[bad][0].item()!r}")
        if flows not in self._resolved:
            for name in flows.names:
                if name not in self._index:
                    known = ", ".join(map(str, self.capacity))
                    raise ValueError(f"resources must be among {known}, not {name!r}")
        return self._start(flows, sizes, together)

    def _start(self, flows: FlowSet, sizes: np.ndarray, together: bool):
        self._advance()
        entry_resource = self._resolved.get(flows)
        if entry_resource is None:
            where = np.array([self._index[name] for name in flows.names], dtype=np.intp)
            entry_resource = self._resolved[flows] = where[flows._entry_name]
        entry_flow = flows._entry_flow
        # in order, flow by flow: the same sums as adding each flow's bytes in turn
        np.add.at(self._bytes, entry_resource, sizes[entry_flow])
        env = self.env
        moving = sizes > 0
        every = bool(moving.all())
        within = flows._every if every else np.flatnonzero(moving)
        count = len(within)
        tag = self._next_tag
        if together:
            done = env.event()
            if not count:
                done.succeed()
                return done
            self._tags[tag] = [count, done]
            self._next_tag += 1
            tags = np.full(count, tag, dtype=np.intp)
        else:
            events = [env.event() for _ in range(len(flows))]
            if not every:
                for i in np.flatnonzero(~moving).tolist():
                    events[i].succeed()
                if not count:
                    return events
            for k, i in enumerate(within.tolist()):
                self._tags[tag + k] = [1, events[i]]
            self._next_tag += count
            tags = np.arange(tag, tag + count, dtype=np.intp)
        if not every:
            keep = moving[entry_flow]
            entry_resource = entry_resource[keep]
            entry_flow = (np.cumsum(moving) - 1)[entry_flow[keep]]
        before = len(self._left)
        if before:
            old_resource, old_flow = self._incidence()
            entry_resource = np.concatenate((old_resource, entry_resource))
            entry_flow = np.concatenate((old_flow, entry_flow + before))
        self._entry_resource, self._entry_flow = entry_resource, entry_flow
        self._left = np.concatenate((self._left, sizes if every else sizes[within]))
        self._rate = np.concatenate((self._rate, np.zeros(count)))
        self._cap = np.concatenate((self._cap, flows._caps if every else flows._caps[within]))
        self._tag = np.concatenate((self._tag, tags))
        self._within = np.concatenate((self._within, within))
        part = None if every else within.tobytes()
        self._batches.append([flows, count, (flows, part)])
        self._reschedule()
        return done if together else events

    def _advance(self):
        dt = self.env.now - self._last
        if dt > 0 and len(self._left):
            self._left -= self._rate * dt
        self._last = self.env.now

    def _retire(self, ended: np.ndarray, count: int):
        """Drop the ``count`` ended flows; fire the events whose flows have all ended, in the
        order a loop over the flows would meet their last one."""
        every = count == len(self._left)
        tags = self._tag if every else self._tag[ended]
        if tags[0] == tags[-1] and (tags == tags[0]).all():
            fire = [(int(tags[0]), count)]
        else:  # counted from the last flow back: the tags in order of their last flow, reversed
            fire = list(collections.Counter(tags[::-1].tolist()).items())[::-1]
        if every:
            self._clear()
        else:
            self._drop(~ended)
        for tag, count in fire:
            waiting = self._tags[tag]
            waiting[0] -= count
            if not waiting[0]:
                del self._tags[tag]
                waiting[1].succeed()

    def _clear(self):
        """Every flow in flight has ended."""
        self._batches = []
        self._dropped = []
        self._left, self._rate, self._cap = np.zeros(0), np.zeros(0), np.zeros(0)
        self._tag = self._within = np.zeros(0, dtype=np.intp)
        self._entry_resource = self._entry_flow = np.zeros(0, dtype=np.intp)

    def _drop(self, keep: np.ndarray):
        """Keep the flows of ``keep`` (the incidence follows when next read)."""
        if len(self._batches) == 1:
            kept = [int(np.count_nonzero(keep))]
        else:
            sizes = [batch[1] for batch in self._batches]
            starts = np.cumsum([0, *sizes[:-1]])
            kept = np.add.reduceat(keep, starts, dtype=np.intp).tolist()
        within = self._within[keep]
        batches, at = [], 0
        for batch, count in zip(self._batches, kept, strict=True):
            if count != batch[1]:
                flows = batch[0]
                batch = [flows, count, (flows, within[at : at + count].tobytes())]
            if count:
                batches.append(batch)
            at += count
        self._batches = batches
        self._dropped.append(keep)
        self._left = self._left[keep]
        self._rate = self._rate[keep]
        self._cap = self._cap[keep]
        self._tag = self._tag[keep]
        self._within = within

    def _incidence(self) -> tuple:
        """Per entry, flow by flow: the resource, and the flow's place among those in flight
        (only filling, logging and starting beside flows in flight read it)."""
        for keep in self._dropped:
            position = np.cumsum(keep) - 1
            entries = keep[self._entry_flow]
            self._entry_resource = self._entry_resource[entries]
            self._entry_flow = position[self._entry_flow[entries]]
        self._dropped = []
        return self._entry_resource, self._entry_flow

    def _rates(self):
        key = tuple([batch[2] for batch in self._batches])
        rates = self._memo.get(key)
        if rates is None:
            rates = self._memo[key] = self._fill()
        self._rate = rates  # never changed in place: shared with the memo

    def _fill(self) -> np.ndarray:
        # progressive filling, every unfrozen flow at once. The unfrozen flows share one rate
        # (``level``: each grew by every step), so a step is min(cap) - level or a resource's
        # share, the same floats as a loop over the flows (rounding is monotonic)
        rate = np.empty(len(self._left))
        capacity = self._capacity
        left = capacity.copy()  # capacity not yet given
        unfrozen = np.arange(len(rate))
        cap = self._cap
        at_cap = cap * _AT_CAP
        resource, flow = self._incidence()
        level = 0.0
        while len(unfrozen):
            users = np.bincount(resource, minlength=len(capacity))
            used = np.flatnonzero(users)
            users = users[used]
            step = float(cap[unfrozen].min()) - level
            if len(used):
                step = min(step, float((left[used] / users).min()))
            level += max(step, 0.0)
            left[used] -= max(step, 0.0) * users
            full = used[left[used] <= 1e-9 * capacity[used]]
            stay = at_cap[unfrozen] > level
            if len(full):
                blocked = np.zeros(len(capacity), dtype=bool)
                blocked[full] = True
                touched = np.zeros(len(rate), dtype=bool)
                touched[flow[blocked[resource]]] = True
                stay &= ~touched[unfrozen]
            elif stay.all():  # numerical safety: nothing saturated, stop filling
                break
            rate[unfrozen[~stay]] = level
            unfrozen = unfrozen[stay]
            still = np.zeros(len(rate), dtype=bool)
            still[unfrozen] = True
            entries = still[flow]
            resource, flow = resource[entries], flow[entries]
        rate[unfrozen] = level
        return rate

    def _reschedule(self):
        ended = self._left <= _EPS_BYTES
        count = int(np.count_nonzero(ended))
        if count:
            self._retire(ended, count)
        self._generation += 1
        if not len(self._left):
            self._log()
            return
        self._rates()
        self._log()
        moving = self._rate > 0
        if moving.all():
            self._moving = None
            wait = float((self._left / self._rate).min())
        else:
            self._moving = moving
            wait = float((self._left[moving] / self._rate[moving]).min())
        generation = self._generation
        timer = self.env.timeout(wait)
        timer.callbacks.append(lambda _event: self._wake(generation))
        self.events += 1

    def _log(self):
        if not self.record:
            return
        # in order, flow by flow, from 0.0: the sums of adding each flow's rate in turn
        resource, flow = self._incidence()
        use = np.bincount(resource, weights=self._rate[flow], minlength=len(self._names))
        # (astype: numpy counts no flows as integers)
        use = dict(zip(self._names, use.astype(float, copy=False).tolist(), strict=True))
        if self.history and self.history[-1][0] == self.env.now:
            self.history[-1] = (self.env.now, use)
        else:
            self.history.append((self.env.now, use))

    def _wake(self, generation):
        if generation != self._generation:
            return
        self._advance()
        # the flow(s) due now may have a few bytes left from rounding: finish them
        due_s = 1e-15 + 1e-12 * self.env.now
        moving = self._moving  # None: every flow in flight moves
        if moving is None:
            self._left[self._left / self._rate <= due_s] = 0.0
        else:
            left = self._left[moving]
            left[left / self._rate[moving] <= due_s] = 0.0
            self._left[moving] = left
        self._reschedule()
