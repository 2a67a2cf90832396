"""Trace events of a collective's transfers: per chip the steps it sends in, per link the
transfers crossing it (Chrome/Perfetto JSON, written by :func:`tlm.chip.trace.write_events`).

:func:`transfer_events` is the one drawing of a collective's timeline, used by ``trnsim
collective --trace`` (:func:`write_collective_trace`, one operation alone on the flow engine)
and by the server model's trace (:mod:`tlm.server.trace`, the all-reduces beside the chips'
kernels).

* each chip (process ``pid`` = chip number) gets a track ``collective sends`` with a slice per
  step it sends in, from the first of its transfers' starts to the last end (name ``ALGO step
  I``; args: the group, and per transfer the destination chip, bytes, reduce or copy);
* a process ``links``: a track per link that carried bytes (named as the system names it,
  ``chip 0 x+``), a slice per transfer crossing it, with its bytes. Transfers that overlap in
  time on one link are async slices (``"ph": "b"``/``"e"``), which Perfetto stacks instead of
  requiring them to nest.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import simpy

from ..chip.bandwidth_sharing import FluidNetwork
from ..chip.trace import process_event, thread_events, write_events
from .flow import Flow, Launch

__all__ = ["TransferSpan", "transfer_events", "flow_spans", "write_collective_trace"]


@dataclass(frozen=True)
class TransferSpan:
    """One transfer of a schedule, as it ran: from its start to its last byte."""

    group: int
    algorithm: str
    step: int
    src_chip: int
    dst_chip: int
    reduce: bool
    start_s: float
    end_s: float
    nbytes: float
    links: tuple[int, ...]

    @classmethod
    def of(cls, schedule, group, step, index, start_s, end_s, nbytes, links) -> TransferSpan:
        """Transfer ``index`` of step ``step`` of ``schedule`` as it ran."""
        t = schedule.steps[step].transfers[index]
        chips = schedule.chips
        return cls(
            group,
            schedule.algorithm,
            step,
            chips[t.src],
            chips[t.dst],
            t.reduce,
            start_s,
            end_s,
            nbytes,
            tuple(links),
        )


def _span(cat, name, ident, pid, tid, start_s, end_s, args) -> list[dict]:
    begin = {"ph": "b", "cat": cat, "name": name, "id": ident, "pid": pid, "tid": tid}
    return [
        {**begin, "ts": start_s * 1e6, "args": args},
        {**begin, "ph": "e", "ts": end_s * 1e6},
    ]


def transfer_events(system, spans, links_pid: int, chip_track) -> list[dict]:
    """Trace events of ``spans`` (:class:`TransferSpan` s) on ``system``.

    Parameters
    ----------
    links_pid : int
        The process id of the ``links`` process.
    chip_track : dict
        Per chip, the track (thread id) of its ``collective sends`` within its process (the
        caller names the chips' processes and these tracks).
    """
    events = [process_event(links_pid, "links")]
    used = sorted({link for s in spans for link in s.links})
    for link in used:
        events += thread_events(links_pid, link, system.links[link].name)
    sent: dict = {}  # (chip, group, step) -> [start, end, algorithm, [(to chip, bytes, kind)]]
    for ident, s in enumerate(sorted(spans, key=lambda s: (s.start_s, s.src_chip, s.dst_chip))):
        key = (s.src_chip, s.group, s.step)
        entry = sent.setdefault(key, [s.start_s, s.end_s, s.algorithm, []])
        entry[0], entry[1] = min(entry[0], s.start_s), max(entry[1], s.end_s)
        entry[3].append([s.dst_chip, s.nbytes, "reduce" if s.reduce else "copy"])
        for link in s.links:
            args = {
                "from_chip": s.src_chip,
                "to_chip": s.dst_chip,
                "bytes": s.nbytes,
                "group": s.group,
                "step": s.step,
            }
            name = system.links[link].name
            events += _span("link", name, ident, links_pid, link, s.start_s, s.end_s, args)
    # a chip's steps never overlap in the shipped schedules (chains of steps, run one operation
    # after another), so they are plain slices of one track
    for (chip, group, step), (start_s, end_s, algorithm, sends) in sorted(sent.items()):
        events.append(
            {
                "ph": "X",
                "name": f"{algorithm} step {step}",
                "pid": chip,
                "tid": chip_track[chip],
                "ts": start_s * 1e6,
                "dur": (end_s - start_s) * 1e6,
                "args": {"group": group, "sends [to chip, bytes, kind]": sends},
            }
        )
    return events


def flow_spans(flow: Flow, chunk_bytes: float) -> list[TransferSpan]:
    """Run ``flow``'s schedule once with every chunk ``chunk_bytes`` bytes, each transfer timed
    on its own (the flow engine's :class:`Launch` with ``record``)."""
    env = simpy.Environment()
    net = FluidNetwork(env, flow.capacity, record=False)
    record: list = []
    Launch(env, net, flow.flows, flow.after, flow.fixed_s, chunk_bytes, flow.waiters, record)
    env.run()
    # a transfer's flows (one per part of its HBM accesses) as one span over its links
    merged: dict = {}
    for step, t, start_s, end_s, nbytes, resources in record:
        links = tuple(r for r in resources if isinstance(r, int))
        span = merged.setdefault((step, t), [start_s, end_s, 0.0, links])
        span[0], span[1] = min(span[0], start_s), max(span[1], end_s)
        span[2] += nbytes
    return [
        TransferSpan.of(flow.schedule, 0, step, t, start_s, end_s, nbytes, links)
        for (step, t), (start_s, end_s, nbytes, links) in merged.items()
    ]


def write_collective_trace(flow: Flow, chunk_bytes: float, path) -> Path:
    """Write one run of ``flow`` as Chrome/Perfetto JSON: a process per chip (per rank, ``rank
    R (chip C)``, on a :class:`~tlm.collectives.runtime.RankSystem`) with its ``collective
    sends`` track, and the ``links`` process."""
    system = flow.system
    rpc = getattr(system, "ranks_per_chip", None)
    events = []
    for chip in range(system.chips):
        name = f"chip {chip}" if rpc is None else f"rank {chip} (chip {chip // rpc})"
        events.append(process_event(chip, name))
        events += thread_events(chip, 0, "collective sends")
    spans = flow_spans(flow, chunk_bytes)
    events += transfer_events(system, spans, system.chips, dict.fromkeys(range(system.chips), 0))
    return write_events(events, path)
