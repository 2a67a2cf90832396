"""The analytic engine: alpha-beta per step with the links each step shares counted, as closed
forms vectorised over sizes.

A step's time is ``step_fixed_s`` (the system preset's fixed cost per step) plus the largest
path latency among its transfers (the sum of its links' ``latency_s``: latency x hops) plus the
largest, over the links, of the bytes the step puts on the link divided by its bandwidth. Every
chunk is charged as the largest chunk (``Schedule.unit_elements`` elements), exact when the
size divides evenly. A step starts when the steps it waits for end; the operation's time is the
last end. For steps in a chain this is ``A + K x chunk_bytes``: two numbers per schedule, and
evaluating a million sizes is a few numpy operations.

Examples
--------
>>> from tlm.collectives import build
>>> from tlm.system import load_system
>>> server = load_system("trn2-server")
>>> cost = Analytic(build("ring", "all_reduce", server), server)
>>> t = cost.time_s([1 << 30], itemsize=2)          # 1 GiB of bf16
>>> round(float(t[0]) * 1e3, 3)                     # 30 steps of 64 MiB at 256 GB/s, 1.5 us each
7.909
"""

from __future__ import annotations

from functools import cached_property

import numpy as np

from .schedule import Schedule

__all__ = ["Analytic"]


class Analytic:
    """The closed form of one schedule on one system.

    Parameters
    ----------
    schedule : Schedule
    system : tlm.system.System
        The system whose chips ``schedule.chips`` names; its links carry the transfers.

    Attributes
    ----------
    fixed_s : ndarray
        Per step: fixed cost plus the longest path latency, in seconds.
    per_unit_s_per_byte : ndarray
        Per step: seconds per byte of one chunk on the busiest link.
    paths : list of list of tuple of int
        Per step, per transfer: the links it crosses (the flow engine reuses the routes).
    """

    def __init__(self, schedule: Schedule, system):
        bw = system.bandwidth_Bps
        links = len(system.links)
        steps = schedule.steps
        # every transfer of every step as arrays (step, source and destination chips, units):
        # a node's groups run together are tens of thousands of transfers
        per_step = np.array([len(step.transfers) for step in steps], dtype=np.intp)
        moves = [(t.src, t.dst, t.stop - t.first) for step in steps for t in step.transfers]
        ranks = np.array(moves, dtype=np.int64).reshape(-1, 3)
        chips = np.asarray(schedule.chips, dtype=np.int64)
        src, dst, units = chips[ranks[:, 0]], chips[ranks[:, 1]], ranks[:, 2]
        # each pair's route and its latency once (a ring's steps repeat their pairs)
        base = int(max(src.max(initial=0), dst.max(initial=0))) + 1
        which = np.unique(src * base + dst, return_inverse=True)[1].ravel()
        first = np.unique(which, return_index=True)[1]
        lat = system.latency_s.tolist()
        routes, latency = [], []
        for a, b in zip(src[first].tolist(), dst[first].tolist(), strict=True):
            path = system.path(a, b)
            routes.append(path)
            latency.append(sum(lat[i] for i in path))
        step = np.repeat(np.arange(len(steps)), per_step)
        # the links each step loads, chunks per link: one count over (step, link)
        lengths = np.array([len(r) for r in routes], dtype=np.intp)[which]
        crossed = np.fromiter(
            (i for w in which.tolist() for i in routes[w]), dtype=np.intp, count=lengths.sum()
        )
        bins = np.repeat(step * links, lengths) + crossed
        load = np.bincount(bins, np.repeat(units, lengths), minlength=len(steps) * links)
        load = load.reshape(len(steps), links)
        longest = np.zeros(len(steps))
        np.maximum.at(longest, step, np.asarray(latency, dtype=float)[which])
        self.schedule = schedule
        self.fixed_s = system.step_fixed_s + longest
        if links:
            self.per_unit_s_per_byte = (load / bw).max(axis=1, initial=0.0)
        else:
            self.per_unit_s_per_byte = np.zeros(len(steps))
        self._routes, self._which, self._per_step = routes, which, per_step
        self.after = [step.after for step in schedule.steps]
        self.chain = all(a == ((i - 1,) if i else ()) for i, a in enumerate(self.after))
        self.total_fixed_s = float(self.fixed_s.sum())
        self.total_per_unit_s_per_byte = float(self.per_unit_s_per_byte.sum())

    @cached_property
    def paths(self) -> list:
        """Per step, per transfer: the links it crosses (the flow engine reuses the
        routes)."""
        routes, out, at = self._routes, [], 0
        for n in self._per_step.tolist():
            out.append([routes[w] for w in self._which[at : at + n].tolist()])
            at += n
        return out

    def chunk_bytes(self, size_bytes, itemsize: int) -> np.ndarray:
        """Bytes of the largest chunk for buffers of ``size_bytes`` (a multiple of
        ``itemsize``)."""
        count = np.asarray(size_bytes, dtype=np.int64) // itemsize
        return self.schedule.unit_elements(count) * itemsize

    def time_s(self, size_bytes, itemsize: int) -> np.ndarray:
        """Time of the operation for each buffer size in ``size_bytes``, in seconds."""
        unit = self.chunk_bytes(size_bytes, itemsize).astype(np.float64)
        if self.chain:
            return self.total_fixed_s + self.total_per_unit_s_per_byte * unit
        ends: list[np.ndarray] = []
        for i, after in enumerate(self.after):
            start = np.max([ends[a] for a in after], axis=0) if after else 0.0
            ends.append(start + self.fixed_s[i] + self.per_unit_s_per_byte[i] * unit)
        return np.max(ends, axis=0) if ends else np.zeros_like(unit)
