"""The analytic engine: alpha-beta per step with the links each step shares counted, as closed
forms vectorised over sizes.

A step's time is ``step_fixed_s`` (the system preset's fixed cost per step) plus the largest
path latency among its transfers (the sum of its links' ``latency_s``: latency x hops) plus the
largest, over the links, of the bytes the step puts on the link divided by its bandwidth, and on a
system with ``hbm_Bps`` (the runtime's ranks) over the chips, of the bytes its transfers read
and write in the chip's HBM (:mod:`tlm.collectives.hbm`) divided by ``hbm_Bps``: links, DMA
queues and HBM stream a chunk's slices at once, so the slowest sets the step. Every
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

from .hbm import transfer_accesses
from .schedule import Schedule

__all__ = ["Analytic", "hbm_per_unit", "is_chain", "together_totals"]


def is_chain(schedule: Schedule) -> bool:
    """Whether each step of ``schedule`` waits for the one before and only it (the closed
    forms' sum of steps holds for a chain; every shipped algorithm is one)."""
    return all(s.after == ((i - 1,) if i else ()) for i, s in enumerate(schedule.steps))


def _transfers(schedule: Schedule) -> tuple:
    """Every transfer of ``schedule`` as arrays, step by step in order: its step, source
    and destination ranks and chunks, and its HBM accesses per chunk at either end."""
    step, src, dst, first, stop, _ = schedule.moves.T
    return step, src, dst, stop - first, transfer_accesses(schedule)


def hbm_per_unit(count: int, step, src, dst, units, reads, system) -> np.ndarray:
    """Per step of ``count``: seconds per byte of a chunk in the busiest chip's HBM, for
    transfers given as arrays (step, source and destination vertices of ``system``, chunks,
    and ``reads``: HBM accesses per chunk at source and destination); zeros on a system that
    does not charge HBM (no ``hbm_Bps``)."""
    rate = getattr(system, "hbm_Bps", None)
    if not rate or not len(step):
        return np.zeros(count)
    at_src, at_dst = reads
    chips = np.concatenate([system.chip_of(src), system.chip_of(dst)])
    width = int(chips.max()) + 1
    bins = np.tile(step, 2) * width + chips
    load = np.bincount(bins, np.concatenate([units * at_src, units * at_dst]), count * width)
    return load.reshape(count, width).max(axis=1) / rate


def _steps(count: int, step, src, dst, units, reads, system) -> tuple:
    """Per step of ``count``: fixed cost plus the longest path latency, and seconds per
    byte of a chunk on the busiest link or chip HBM (:func:`hbm_per_unit`), for transfers
    given as arrays (their step, source and destination chips of ``system``, chunks, HBM
    accesses); the HBM's part of the latter; and the routes of the distinct pairs and each
    transfer's pair."""
    bw = system.bandwidth_Bps
    links = len(system.links)
    # each pair's route and its latency once (a ring's steps repeat their pairs)
    base = int(max(src.max(initial=0), dst.max(initial=0))) + 1
    _, first, which = np.unique(src * base + dst, return_index=True, return_inverse=True)
    which = which.ravel()
    # kept per system: the closed forms of every algorithm on a system cross the same pairs
    known = system.cached("analytic routes", dict)
    lat = None
    routes, latency = [], []
    for pair in zip(src[first].tolist(), dst[first].tolist(), strict=True):
        hit = known.get(pair)
        if hit is None:
            if lat is None:
                lat = system.latency_s.tolist()
            path = system.path(*pair)
            hit = known[pair] = (path, sum(lat[i] for i in path))
        routes.append(hit[0])
        latency.append(hit[1])
    # every transfer's links in order: the routes as rows of a table padded with -1, a row
    # per transfer (a schedule is thousands of transfers over a few hundred routes)
    width = max((len(r) for r in routes), default=0)
    table = np.array([(*r, *(-1,) * (width - len(r))) for r in routes], dtype=np.intp)
    table = table.reshape(len(routes), width)
    lengths = (table >= 0).sum(axis=1)[which]
    crossed = table[which]
    crossed = crossed[crossed >= 0]
    # the chunks each step puts on each link: one count over (step, link) (integers: exact
    # in any order)
    bins = np.repeat(step * links, lengths) + crossed
    load = np.bincount(bins, np.repeat(units, lengths), minlength=count * links)
    longest = np.zeros(count)
    np.maximum.at(longest, step, np.asarray(latency, dtype=float)[which])
    fixed = system.step_fixed_s + longest
    if links:
        per_unit = (load.reshape(count, links) / bw).max(axis=1, initial=0.0)
    else:
        per_unit = np.zeros(count)
    hbm = hbm_per_unit(count, step, src, dst, units, reads, system)
    return fixed, np.maximum(per_unit, hbm), hbm, routes, which


def together_totals(schedule: Schedule, systems, parent) -> tuple[float, float]:
    """``(A, K)`` - the summed fixed seconds and seconds per chunk byte - of ``schedule``
    (built on one group's sub-system, a chain of steps) run by every group of ``systems``
    at once on ``parent`` (:func:`tlm.collectives.groups.run_together`'s schedule, without
    making it): each step's transfers are every group's, their chunks loading the parent's
    links together; the same figures as :class:`Analytic` of that schedule.
    """
    step, src, dst, units, (at_src, at_dst) = _transfers(schedule)
    # chip of the parent of each group's each rank
    members = np.array(
        [[sub.members[c] for c in schedule.chips] for sub in systems], dtype=np.int64
    ).reshape(len(systems), len(schedule.chips))
    groups = len(systems)
    fixed, per_unit, _, _, _ = _steps(
        len(schedule.steps),
        np.tile(step, groups),
        members[:, src].ravel(),
        members[:, dst].ravel(),
        np.tile(units, groups),
        (np.tile(at_src, groups), np.tile(at_dst, groups)),
        parent,
    )
    return float(fixed.sum()), float(per_unit.sum())


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
        Per step: seconds per byte of one chunk on the busiest link or chip HBM.
    hbm_s_per_byte : ndarray
        Per step: seconds per byte of one chunk in the busiest chip's HBM (zeros on a system
        that does not charge HBM).
    paths : list of list of tuple of int
        Per step, per transfer: the links it crosses (the flow engine reuses the routes).
    """

    def __init__(self, schedule: Schedule, system):
        step, src, dst, units, reads = _transfers(schedule)
        chips = np.asarray(schedule.chips, dtype=np.int64)
        self.fixed_s, self.per_unit_s_per_byte, self.hbm_s_per_byte, routes, which = _steps(
            len(schedule.steps), step, chips[src], chips[dst], units, reads, system
        )
        self.schedule = schedule
        self._routes, self._which = routes, which
        self._per_step = np.bincount(step, minlength=len(schedule.steps))
        self.after = [step.after for step in schedule.steps]
        self.chain = is_chain(schedule)
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
