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
        bw, lat = system.bandwidth_Bps, list(system.latency_s)
        links = len(system.links)
        chips = schedule.chips
        fixed, per_unit, self.paths = [], [], []
        for step in schedule.steps:
            crossed, weights = [], []
            longest = 0.0
            self.paths.append([])
            for t in step.transfers:
                path = system.path(chips[t.src], chips[t.dst])
                self.paths[-1].append(path)
                crossed += path
                weights += [t.units] * len(path)
                longest = max(longest, sum(lat[i] for i in path))
            load = np.bincount(crossed, weights, minlength=links) if crossed else np.zeros(links)
            fixed.append(system.step_fixed_s + longest)
            per_unit.append(float((load / bw).max()) if links else 0.0)
        self.schedule = schedule
        self.fixed_s = np.array(fixed)
        self.per_unit_s_per_byte = np.array(per_unit)
        self.after = [step.after for step in schedule.steps]
        self.chain = all(a == ((i - 1,) if i else ()) for i, a in enumerate(self.after))
        self.total_fixed_s = float(self.fixed_s.sum())
        self.total_per_unit_s_per_byte = float(self.per_unit_s_per_byte.sum())

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
