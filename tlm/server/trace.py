"""The trace of a tensor-parallel step: one Chrome/Perfetto JSON file for the whole server.

* a process per chip (``chip 3``): a track per core engine and DMA queue as
  :mod:`tlm.chip.trace` draws them (``core0 tensor`` ..), each instruction a slice; and a track
  ``collective sends`` with a slice per collective step the chip sends in, from the step's
  launch to its last byte (name ``ALGO step I``; args: the block group, and per transfer the
  destination chip, bytes, reduce or copy);
* a process ``links``: one track per link that carried bytes (named as the system names it,
  ``chip 0 x+``), one slice per transfer crossing it, with its bytes.

The collective's part is :func:`tlm.collectives.trace.transfer_events`, the one drawing of a
collective's timeline (``trnsim collective --trace`` uses it too). Written by
:func:`tlm.chip.trace.write_events` (the one writer). Open the file in https://ui.perfetto.dev (or chrome://tracing).
"""

from __future__ import annotations

from pathlib import Path

from ..chip.trace import instruction_event, process_event, queues, thread_events, write_events
from ..collectives.trace import TransferSpan, transfer_events

__all__ = ["step_events", "write_step_trace"]


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
    # a transfer is one flow per HBM stack: its span covers them all, with their bytes
    transfers: dict = {}
    for group, index, t, start_s, end_s, nbytes, resources in step.flows:
        key = (group, index, t)
        if key not in transfers:
            links = tuple(r for r in resources if isinstance(r, int))
            transfers[key] = [start_s, end_s, 0.0, links]
        entry = transfers[key]
        entry[0], entry[1] = min(entry[0], start_s), max(entry[1], end_s)
        entry[2] += nbytes
    spans = [
        TransferSpan.of(step.schedules[step.groups[g].algorithm], g, i, t, *entry)
        for (g, i, t), entry in sorted(transfers.items())
    ]
    return events + transfer_events(system, spans, len(step.runs), tracks)


def write_step_trace(step, path) -> Path:
    """Write the step's trace (run it with ``record=True``) as Chrome/Perfetto JSON."""
    if not step.flows and step.groups:
        raise ValueError("step must be run with record=True to be traced, not without")
    return write_events(step_events(step), path)
