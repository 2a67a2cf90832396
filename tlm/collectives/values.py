"""The values engine: every rank holds a real buffer and the schedule moves and reduces it.

:func:`execute` runs a schedule's steps on ``(ranks, count)`` buffers in the schedule's order
under the numerics contract (:mod:`tlm.collectives.numerics`): in each step every transfer reads
its source as the step began, then the transfers apply in the order listed. :func:`run`
prepares the buffers an operation starts from (:func:`initial`) and returns what it delivers
(:func:`outputs`); :func:`reference` computes the same from the inputs alone - data movement
with numpy, reductions in the order the algorithm declares (``Schedule.order``) - so a test
compares the two bit for bit.

Inputs and outputs of each operation (``r`` ranks, ``count`` elements; ``count`` a multiple of
``r`` where the operation cuts the buffer into shares):

============== ================== =================== =========================================
op             inputs             outputs             output
============== ================== =================== =========================================
all_reduce     (r, count)         (r, count)          every rank: the reduction of all inputs
reduce_scatter (r, count)         (r, count / r)      rank j: block j of the reduction
all_gather     (r, count / r)     (r, count)          every rank: the inputs, rank after rank
all_to_all     (r, count)         (r, count)          rank j, block i: rank i's input block j
broadcast      (count,)           (r, count)          every rank: rank 0's input
permute        (r, count)         (r, count)          rank j: rank j - 1's input
============== ================== =================== =========================================

Examples
--------
>>> import numpy as np
>>> from tlm.collectives import build
>>> from tlm.system import load_system
>>> s = build("rdh", "all_reduce", load_system("trn2-server"))
>>> x = np.arange(16 * 3, dtype=np.float32).reshape(16, 3)
>>> out = run(s, x)
>>> out[5].tolist(), bool((out == reference(s, x)).all())
([360.0, 376.0, 392.0], True)
"""

from __future__ import annotations

import numpy as np

from .numerics import combine
from .schedule import REDUCING, Schedule, Step

__all__ = [
    "execute",
    "payloads",
    "apply",
    "run",
    "initial",
    "outputs",
    "reference",
    "shares",
    "fold",
]


def _empty(shape, dtype) -> np.ndarray:
    """A buffer a rank has not been given: NaN, so a chunk never delivered shows."""
    return np.full(shape, np.nan, dtype=np.float32).astype(dtype)


def execute(schedule: Schedule, buffers: np.ndarray, reduction: str = "sum") -> np.ndarray:
    """Run ``schedule`` on ``buffers`` (``(ranks, count)``, one row per rank) in place; return
    them."""
    bounds = schedule.bounds(buffers.shape[1])
    for step in schedule.steps:
        apply(step, buffers, bounds, payloads(step, buffers, bounds), reduction)
    return buffers


def payloads(step: Step, buffers: np.ndarray, bounds: np.ndarray) -> list[np.ndarray]:
    """What each transfer of ``step`` carries: its source's chunks as the step begins (copies).

    ``bounds`` are the chunks' element offsets (``Schedule.bounds``). A network model may carry
    these between :func:`payloads` and :func:`apply` (the RTL bench sends their bytes as
    packets, :mod:`tlm.collectives.packets`)."""
    return [buffers[t.src, bounds[t.first] : bounds[t.stop]].copy() for t in step.transfers]


def apply(
    step: Step,
    buffers: np.ndarray,
    bounds: np.ndarray,
    data: list[np.ndarray],
    reduction: str = "sum",
) -> np.ndarray:
    """Deliver ``data`` (one array per transfer of ``step``, as :func:`payloads` gives) into
    ``buffers`` in the order the transfers are listed: copied, or reduced under the numerics
    contract."""
    for t, chunk in zip(step.transfers, data, strict=True):
        lo, hi = bounds[t.dst_first], bounds[t.dst_first + t.units]
        if t.reduce:
            buffers[t.dst, lo:hi] = combine(buffers[t.dst, lo:hi], chunk, reduction)
        else:
            buffers[t.dst, lo:hi] = chunk
    return buffers


def shares(schedule: Schedule, count: int) -> np.ndarray:
    """Element offsets of the ranks' shares (blocks) for ``count`` elements."""
    return schedule.bounds(count)[:: schedule.subs]


def run(schedule: Schedule, inputs: np.ndarray, reduction: str = "sum") -> np.ndarray:
    """The outputs of ``schedule``'s operation on ``inputs`` (see the module's table)."""
    buffers = execute(schedule, initial(schedule, inputs), reduction)
    return outputs(schedule, buffers)


def initial(schedule: Schedule, inputs: np.ndarray) -> np.ndarray:
    """The ``(ranks, count)`` buffers ``schedule``'s operation starts from, given its inputs
    (see the module's table); what :func:`run` executes on, and a network model too."""
    r, op = schedule.ranks, schedule.op
    inputs = np.asarray(inputs)
    if op == "broadcast":
        buffers = _empty((r, inputs.shape[0]), inputs.dtype)
        buffers[schedule.root] = inputs
    elif op == "all_gather":
        count = inputs.shape[1] * r
        buffers = _empty((r, count), inputs.dtype)
        edges = shares(schedule, count)
        for j in range(r):
            buffers[j, edges[j] : edges[j + 1]] = inputs[j]
    else:
        buffers = inputs.copy()
    return buffers


def outputs(schedule: Schedule, buffers: np.ndarray) -> np.ndarray:
    """What the operation delivers, from the buffers after the last step."""
    if schedule.op == "reduce_scatter":
        edges = shares(schedule, buffers.shape[1])
        return np.stack([buffers[j, edges[j] : edges[j + 1]] for j in range(schedule.ranks)])
    return buffers


def fold(tree, values: np.ndarray, reduction: str) -> np.ndarray:
    """Reduce ``values[rank]`` over a reduction tree (nested pairs of ranks)."""
    if isinstance(tree, tuple):
        return combine(
            fold(tree[0], values, reduction), fold(tree[1], values, reduction), reduction
        )
    return values[tree]


def reference(schedule: Schedule, inputs: np.ndarray, reduction: str = "sum") -> np.ndarray:
    """What ``schedule``'s operation must deliver, from the inputs and the algorithm's declared
    reduction order only (never from its steps)."""
    r, op = schedule.ranks, schedule.op
    inputs = np.asarray(inputs)
    if op == "broadcast":
        return np.stack([inputs] * r)
    if op == "all_gather":
        return np.stack([np.concatenate(list(inputs))] * r)
    if op == "permute":
        return np.roll(inputs, 1, axis=0)
    if op == "all_to_all":
        blocks = inputs.reshape(r, r, -1)
        return blocks.transpose(1, 0, 2).reshape(r, -1)
    assert op in REDUCING
    count = inputs.shape[1]
    bounds = schedule.bounds(count)
    out = np.empty_like(inputs)
    for c in range(schedule.chunks):
        lo, hi = bounds[c], bounds[c + 1]
        if hi == lo:
            continue
        done = {}  # most algorithms give every rank the same tree (object): fold it once
        for rank in range(r):
            tree = schedule.order(rank, c)
            if id(tree) not in done:
                done[id(tree)] = (tree, fold(tree, inputs[:, lo:hi], reduction))
            out[rank, lo:hi] = done[id(tree)][1]
    if op == "reduce_scatter":
        edges = shares(schedule, count)
        return np.stack([out[j, edges[j] : edges[j + 1]] for j in range(r)])
    return out
