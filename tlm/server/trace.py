"""The trace of a tensor-parallel step: one Chrome/Perfetto JSON file for the whole server.

* a process per chip (``chip 3``): a track per core engine and DMA queue as
  :mod:`tlm.chip.trace` draws them (``core0 tensor`` ..), each instruction a slice; and a track
  ``collective sends`` with a slice per collective step the chip sends in, from the step's
  launch to its last byte (name ``ALGO step I``; args: the block group, and per transfer the
  destination chip, bytes, reduce or copy);
* a process ``links``: one track per link that carried bytes (named as the system names it,
  ``chip 0 x+``), one slice per transfer crossing it, with its bytes.

Transfers that overlap in time on one link are async slices (``"ph": "b"``/``"e"``), which
Perfetto stacks instead of requiring them to nest. Written by :func:`tlm.chip.trace.write_events`
(the one writer). Open the file in https://ui.perfetto.dev (or chrome://tracing).
"""

from __future__ import annotations

from pathlib import Path

from ..chip.trace import instruction_event, process_event, queues, thread_events, write_events

__all__ = ["step_events", "write_step_trace"]


def _span(cat, name, ident, pid, tid, start_s, end_s, args) -> list[dict]:
    begin = {"ph": "b", "cat": cat, "name": name, "id": ident, "pid": pid, "tid": tid}
    return [
        {**begin, "ts": start_s * 1e6, "args": args},
        {**begin, "ph": "e", "ts": end_s * 1e6},
    ]


def step_events(step) -> list[dict]:
    """The trace events of a :class:`~tlm.server.TensorParallelStep` run with ``record``."""
    system = step.system
    events: list[dict] = []
    tracks = {}  # the collective track of each chip
    for chip, run in enumerate(step.runs):
        keys = queues(run)
        tid = {key: n for n, key in enumerate(keys)}
        events.append(process_event(chip, f"chip {chip}"))
        for (core, queue), n in tid.items():
            events += thread_events(chip, n, f"core{core} {queue}")
        tracks[chip] = len(keys)
        events += thread_events(chip, tracks[chip], "collective sends")
        for inst in run.program:
            events.append(instruction_event(inst, chip, tid[(inst.core, inst.queue)]))
    links_pid = len(step.runs)
    events.append(process_event(links_pid, "links"))
    # a transfer is one flow per HBM stack: its slice spans them all, with their bytes
    transfers: dict = {}
    for group, index, t, start_s, end_s, nbytes, resources in step.flows:
        key = (group, index, t)
        if key not in transfers:
            links = tuple(r for r in resources if isinstance(r, int))
            transfers[key] = [start_s, end_s, 0.0, links]
        entry = transfers[key]
        entry[1] = max(entry[1], end_s)
        entry[2] += nbytes
    used = sorted({link for entry in transfers.values() for link in entry[3]})
    for link in used:
        events += thread_events(links_pid, link, system.links[link].name)
    sent: dict = {}  # (chip, group, step) -> [start, end, [(to chip, bytes, kind)]]
    ident = 0
    for (group, index, t), (start_s, end_s, nbytes, links) in sorted(transfers.items()):
        info = step.groups[group]
        schedule = step.schedules[info.algorithm]
        transfer = schedule.steps[index].transfers[t]
        src, dst = schedule.chips[transfer.src], schedule.chips[transfer.dst]
        entry = sent.setdefault((src, group, index), [start_s, end_s, []])
        entry[1] = max(entry[1], end_s)
        entry[2].append([dst, nbytes, "reduce" if transfer.reduce else "copy"])
        for link in links:
            ident += 1
            events += _span(
                "link",
                system.links[link].name,
                ident,
                links_pid,
                link,
                start_s,
                end_s,
                {"from_chip": src, "to_chip": dst, "bytes": nbytes, "group": group, "step": index},
            )
    # a chip's steps never overlap (every shipped schedule is a chain of steps, and the
    # all-reduces run one after another), so they are plain slices of one track
    for (chip, group, index), (start_s, end_s, sends) in sorted(sent.items()):
        algorithm = step.groups[group].algorithm
        events.append(
            {
                "ph": "X",
                "name": f"{algorithm} step {index}",
                "pid": chip,
                "tid": tracks[chip],
                "ts": start_s * 1e6,
                "dur": (end_s - start_s) * 1e6,
                "args": {"group": group, "sends [to chip, bytes, kind]": sends},
            }
        )
    return events


def write_step_trace(step, path) -> Path:
    """Write the step's trace (run it with ``record=True``) as Chrome/Perfetto JSON."""
    if not step.flows and step.groups:
        raise ValueError("step must be run with record=True to be traced, not without")
    return write_events(step_events(step), path)
