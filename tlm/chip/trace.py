"""Traces of a simulated kernel: Chrome/Perfetto JSON and a VCD for GTKWave.

The JSON has a process per core and a track (thread) per engine and DMA queue; each
instruction is a complete event from its start to the queue being free again. The VCD (pyvcd)
has, per core, a busy bit per engine and DMA queue, the depth of each queue (instructions not
yet finished) and the SBUF bytes per partition in use (an allocation counts from the start of
the first instruction that touches it to the end of the last); and per HBM stack the bandwidth
in use in GB/s.
"""

from __future__ import annotations

import json
from pathlib import Path

from vcd import VCDWriter

from ..core.instruction import ENGINES

__all__ = [
    "write_chrome_trace",
    "write_vcd",
    "write_events",
    "process_event",
    "thread_events",
    "instruction_event",
    "queues",
]


def queues(run) -> list:
    """The ``(core, queue)`` tracks of a run, cores in order, engines before DMA queues."""
    keys = sorted(
        {(i.core, i.queue) for i in run.program},
        key=lambda k: (k[0], ENGINES.index(k[1]) if k[1] in ENGINES else 4 + int(k[1][3:])),
    )
    return keys


def process_event(pid: int, name: str) -> dict:
    """Trace metadata naming process ``pid``."""
    return {"ph": "M", "name": "process_name", "pid": pid, "args": {"name": name}}


def thread_events(pid: int, tid: int, name: str) -> list[dict]:
    """Trace metadata naming track ``tid`` of process ``pid`` and keeping it at its place."""
    return [
        {"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}},
        {
            "ph": "M",
            "name": "thread_sort_index",
            "pid": pid,
            "tid": tid,
            "args": {"sort_index": tid},
        },
    ]


def instruction_event(inst, pid: int, tid: int) -> dict:
    """An instruction as a complete event, from its start to its queue being free again."""
    return {
        "ph": "X",
        "name": inst.op,
        "pid": pid,
        "tid": tid,
        "ts": inst.start_s * 1e6,
        "dur": max(inst.end_s - inst.start_s, 0.0) * 1e6,
        "args": {"label": inst.label, "done_us": inst.done_s * 1e6},
    }


def write_events(events: list, path) -> Path:
    """Write trace events as Chrome trace-event JSON (the one writer of every trace)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"traceEvents": events, "displayTimeUnit": "ns"}))
    return path


def write_chrome_trace(run, path) -> Path:
    """Write ``run`` as Chrome trace-event JSON (open in ui.perfetto.dev or chrome://tracing)."""
    keys = queues(run)
    tid = {key: n for n, key in enumerate(keys)}
    events = [process_event(core, f"core{core}") for core in sorted({k[0] for k in keys})]
    for key, n in tid.items():
        events += thread_events(key[0], n, key[1])
    for inst in run.program:
        events.append(instruction_event(inst, inst.core, tid[(inst.core, inst.queue)]))
    return write_events(events, path)


def _sbuf_changes(run):
    live = {}
    for inst in run.program:
        for alloc_id, memory, nbytes in inst.allocs:
            if not memory.endswith(".sbuf"):
                continue
            start, end, _, _ = live.get(alloc_id, (inst.start_s, inst.done_s, memory, nbytes))
            live[alloc_id] = (min(start, inst.start_s), max(end, inst.done_s), memory, nbytes)
    changes = []
    for start, end, memory, nbytes in live.values():
        core = int(memory.split(".")[0][4:])
        changes.append((start, core, nbytes))
        changes.append((end, core, -nbytes))
    changes.sort(key=lambda c: (c[0], c[2]))
    return changes


def write_vcd(run, path, *, timescale_ps: int = 100) -> Path:
    """Write engine busy bits, queue depths and SBUF occupancy as a VCD (time unit 100 ps)."""
    path = Path(path)
    keys = queues(run)
    changes = []  # (tick, order, var key, value)

    def tick(t):
        return int(round(t * 1e12 / timescale_ps))

    pending = {key: 0 for key in keys}
    for inst in run.program:
        pending[(inst.core, inst.queue)] += 1
    for inst in run.program:
        key = (inst.core, inst.queue)
        changes.append((tick(inst.start_s), 1, ("busy", key), 1))
        changes.append((tick(inst.end_s), 0, ("busy", key), 0))
        changes.append((tick(inst.end_s), 2, ("depth", key), -1))
    for t, core, delta in _sbuf_changes(run):
        changes.append((tick(t), 3, ("sbuf", core), delta))
    stacks = sorted({r for _, use in run.bandwidth_history for r in use if r.startswith("hbm")})
    for t, use in run.bandwidth_history:
        for stack in stacks:
            changes.append((tick(t), 4, ("hbm", stack), use.get(stack, 0.0) / 1e9))
    changes.sort(key=lambda c: (c[0], c[1]))
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f, VCDWriter(f, timescale=f"{timescale_ps} ps", date="today") as w:
        var = {}
        busy_count = {}
        for key in keys:
            scope = f"chip.core{key[0]}"
            var[("busy", key)] = w.register_var(scope, f"{key[1]}_busy", "wire", size=1, init=0)
            var[("depth", key)] = w.register_var(
                scope, f"{key[1]}_depth", "integer", size=32, init=pending[key]
            )
            busy_count[key] = 0
        sbuf = {}
        for core in sorted({k[0] for k in keys}):
            var[("sbuf", core)] = w.register_var(
                f"chip.core{core}", "sbuf_bytes_per_partition", "integer", size=32, init=0
            )
            sbuf[core] = 0
        for stack in stacks:
            var[("hbm", stack)] = w.register_var("chip", f"{stack}_GBps", "real", init=0.0)
        for t, _, (kind, key), value in changes:
            if kind == "busy":
                busy_count[key] += 1 if value else -1
                w.change(var[(kind, key)], t, 1 if busy_count[key] > 0 else 0)
            elif kind == "depth":
                pending[key] += value
                w.change(var[(kind, key)], t, pending[key])
            elif kind == "hbm":
                w.change(var[(kind, key)], t, value)
            else:
                sbuf[key] += value
                w.change(var[(kind, key)], t, sbuf[key])
    return path
