"""Replica groups: one collective run by several groups of ranks at once, as nccom-test runs
it with ``--custom-replica-groups`` (a JSON file, ``{"replica_groups": [[[0, 1, ...], ...]]}``)
or ``--data-parallel-dimension D`` (``ranks / D`` groups of ``D`` ranks, one from each
``ranks / D`` in turn: rank ``i`` is in group ``i mod (ranks / D)``; the docs say it is meant for
groups of one rank per node, which this striding gives - how it lays groups inside a node is not
published, ASSUMED).

Every group runs the same operation on its own ranks, all at the same time, sharing the links
and DMA queues they cross: the schedule is built on the first group's sub-system (its ranks as
a system of their own, :meth:`tlm.system.System.subset` or
:meth:`tlm.collectives.runtime.RankSystem.subset`) and :func:`run_together` runs it in every
group at once on the whole system. The groups must partition the ranks, have one size (2 or
more) and one shape (translates of each other: the same torus of sub-system, the same nodes);
the order a group lists its ranks in does not matter (the algorithms lay ranks out by where
they are). Sizes are per group member, as nccom-test's: ``busbw`` counts the group's ranks.

Examples
--------
>>> from tlm.system import load_system
>>> server = load_system("trn2-server")
>>> groups = parse_replica_groups('{"replica_groups": [[[0, 1, 2, 3], [4, 5, 6, 7], '
...     '[8, 9, 10, 11], [12, 13, 14, 15]]]}', ranks=16)
>>> subs = group_systems(server, groups)
>>> len(subs), subs[0].torus.shape, subs[1].members
(4, (4,), (4, 5, 6, 7))
>>> strided(16, 4)[0]                                   # --data-parallel-dimension 4
(0, 4, 8, 12)
"""

from __future__ import annotations

import json

from .algorithms import CollectiveError
from .schedule import Schedule, Step, Transfer

__all__ = [
    "GroupError",
    "group_systems",
    "parse_replica_groups",
    "run_together",
    "strided",
]

_FORM = '{"replica_groups": [[[0, 1, ...], [..], ...]]} (nccom-test\'s form)'


class GroupError(CollectiveError):
    """Replica groups that are not allowed; the message says what is."""


def parse_replica_groups(text: str, ranks: int) -> tuple[tuple[int, ...], ...]:
    """The groups of a ``--custom-replica-groups`` JSON text over ``ranks`` ranks, checked.

    Raises
    ------
    GroupError
        For text that is not nccom-test's form, or groups that do not partition the ranks
        ``0..ranks-1`` into groups of one size of 2 or more.
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError as problem:
        raise GroupError(f"not JSON ({problem.msg}, line {problem.lineno}); need {_FORM}") from None
    sets = data.get("replica_groups") if isinstance(data, dict) else None
    if (
        not isinstance(sets, list)
        or len(sets) != 1
        or not isinstance(sets[0], list)
        or not all(isinstance(g, list) for g in sets[0])
    ):
        raise GroupError(f"not nccom-test's form: need {_FORM}, one list of groups")
    groups = sets[0]
    for group in groups:
        for r in group:
            if isinstance(r, bool) or not isinstance(r, int):
                raise GroupError(f"rank {r!r} is not an integer: need {_FORM}")
    return check_groups([tuple(g) for g in groups], ranks)


def strided(ranks: int, dimension: int) -> tuple[tuple[int, ...], ...]:
    """The groups of ``--data-parallel-dimension dimension`` over ``ranks`` ranks: ``ranks /
    dimension`` groups, rank ``i`` in group ``i mod (ranks / dimension)``.

    Raises
    ------
    GroupError
        For a dimension that is not a divisor of ``ranks`` of 2 or more.
    """
    if (
        isinstance(dimension, bool)
        or not isinstance(dimension, int)
        or dimension < 2
        or ranks % dimension
    ):
        raise GroupError(f"must divide the {ranks} ranks, 2 or more, not {dimension!r}")
    count = ranks // dimension
    return tuple(tuple(range(i, ranks, count)) for i in range(count))


def check_groups(groups, ranks: int) -> tuple[tuple[int, ...], ...]:
    """``groups`` as sorted tuples, checked to partition ``0..ranks-1`` into groups of one
    size of 2 or more."""
    groups = tuple(tuple(sorted(g)) for g in groups)
    seen = [r for g in groups for r in g]
    if sorted(seen) != list(range(ranks)):
        missing = sorted(set(range(ranks)) - set(seen))
        twice = sorted({r for r in seen if seen.count(r) > 1})
        extra = sorted(r for r in set(seen) if not 0 <= r < ranks)
        why = "; ".join(
            text
            for text, values in (
                ("missing", missing),
                ("listed twice", twice),
                (f"not ranks 0..{ranks - 1}", extra),
            )
            if values
        )
        raise GroupError(
            f"must list each of the {ranks} ranks once: {why} {_short(missing or twice or extra)}"
        )
    sizes = sorted({len(g) for g in groups})
    if len(sizes) != 1 or sizes[0] < 2:
        raise GroupError(f"must be groups of one size, 2 or more ranks, not sizes {sizes}")
    return groups


def _short(values) -> str:
    shown = ", ".join(map(str, values[:8]))
    return f"({shown}{', ...' if len(values) > 8 else ''})"


def group_systems(system, groups) -> list:
    """Each group's ranks as a system of their own (``system.subset``, whose ``members``
    are the group's ranks), all of one shape.

    Raises
    ------
    GroupError
        For groups whose sub-systems differ in shape (torus, nodes), or that the system cannot
        lay out (:meth:`subset`'s rules: as many ranks in each node, or chip, they occupy).
    """
    subs = []
    for group in groups:
        try:
            subs.append(system.subset(group))
        except ValueError as problem:
            raise GroupError(f"group {_short(list(group))} cannot be laid out: {problem}") from None
    first = subs[0]
    shape = (first.torus, first.nodes, first.chips_per_node)
    for group, sub in zip(groups, subs, strict=True):
        if (sub.torus, sub.nodes, sub.chips_per_node) != shape:
            raise GroupError(
                f"must be of one shape (translates of each other): group {_short(list(group))} "
                f"is {_shape(sub)}, group {_short(list(groups[0]))} {_shape(first)}"
            )
    return subs


def _shape(sub) -> str:
    torus = "x".join(map(str, sub.torus.shape)) if sub.torus is not None else "no torus"
    return f"{sub.nodes} node(s) of {sub.chips_per_node} ranks, {torus}"


def run_together(schedule: Schedule, systems) -> Schedule:
    """``schedule`` (built on one group's sub-system) run by every group at once: one
    schedule on the parent system whose ranks are each group's ranks in turn and whose step
    ``i`` holds every group's step ``i``. For the timing engines (analytic, flow): it
    declares no reduction order, so the values engine does not run it.

    Parameters
    ----------
    schedule : Schedule
        Built on a sub-system (:meth:`tlm.system.System.subset`) of the same shape as each of
        ``systems``.
    systems : list of System
        Each group's sub-system, all of one parent; its chips are the parent's.
    """
    chips, steps = [], [[] for _ in schedule.steps]
    for sub in systems:
        base = len(chips)
        chips += [sub.members[c] for c in schedule.chips]
        for i, step in enumerate(schedule.steps):
            if not base:  # the first group's ranks are the schedule's own
                steps[i] += step.transfers
                continue
            steps[i] += [
                Transfer(base + t.src, base + t.dst, t.first, t.stop, t.reduce, t.at)
                for t in step.transfers
            ]
    return Schedule(
        schedule.op,
        schedule.algorithm,
        tuple(chips),
        schedule.blocks,
        schedule.subs,
        tuple(
            Step(tuple(moves), s.after, s.label)
            for moves, s in zip(steps, schedule.steps, strict=True)
        ),
    )
