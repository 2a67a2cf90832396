"""Every algorithm by name, which operations and systems each fits, and ``auto``.

``auto`` follows the thresholds the Neuron runtime documents (CCi): Mesh below 1 MB, recursive
doubling/halving from 1 MB to 56 MB, KangaRing above 56 MB (on the trn2 server's 16 chips with 1,
2 or 4 ranks each, or 16 ranks on 4 of them); where the documented choice does not fit (ranks
not a power of two, not that 4x4 torus, an operation the algorithm does not run) it
falls back to the torus-native rings of rings (the snake ring off a torus or round a failed
link), as the table in docs/collectives.md says; on nodes joined by EFA it picks the
hierarchical all-reduce, and rings of rings for the other reductions and gathers (the runtime's
hierarchical composition). MB here is 2^20 bytes.

Examples
--------
>>> from tlm.system import load_system
>>> server = load_system("trn2-server")
>>> [choose("all_reduce", server, size) for size in (64 << 10, 8 << 20, 1 << 30)]
['mesh', 'rdh', 'kangaring']
>>> choose("all_reduce", load_system("4xtrn2-server"), 1 << 30)
'hierarchical'
>>> choose("all_reduce", load_system("trn2-ultraserver"), 1 << 30)   # no KangaRing on 4x4x4
'rings'
"""

from __future__ import annotations

import dataclasses

from . import hierarchical, kangaring, mesh, mesh1, rdh, ring, rings
from .schedule import OPS, Schedule

__all__ = [
    "ALGORITHMS",
    "ALGOS",
    "AUTO_MESH_BELOW_BYTES",
    "AUTO_RDH_BELOW_BYTES",
    "CollectiveError",
    "build",
    "choose",
    "unfit",
]

#: Algorithm modules by name (each has NAME, OPS, fits(system, op), build(op, system)).
ALGORITHMS = {m.NAME: m for m in (ring, mesh, mesh1, rdh, kangaring, hierarchical, rings)}
#: What ``--algo`` accepts.
ALGOS = ("auto", *ALGORITHMS)
#: ``auto``'s documented thresholds (CCi).
AUTO_MESH_BELOW_BYTES = 1 << 20
AUTO_RDH_BELOW_BYTES = 56 << 20


class CollectiveError(ValueError):
    """An operation or algorithm that does not apply."""


def unfit(algorithm: str, op: str, system) -> str | None:
    """Why ``algorithm`` cannot run ``op`` on ``system``, or None when it can."""
    if op not in OPS:
        raise CollectiveError(f"op must be one of {', '.join(OPS)}, not {op!r}")
    if algorithm not in ALGORITHMS:
        raise CollectiveError(
            f"algorithm must be one of {', '.join(ALGORITHMS)}, not {algorithm!r}"
        )
    module = ALGORITHMS[algorithm]
    if op not in module.OPS:
        return f"runs {', '.join(module.OPS)}, not {op}"
    return module.fits(system, op)


def build(algorithm: str, op: str, system, root: int = 0) -> Schedule:
    """The schedule of ``op`` by ``algorithm`` over every chip of ``system`` (built once per
    system and kept).

    Parameters
    ----------
    root : int
        The chip a broadcast starts from. Each algorithm is written from its own first rank's
        chip; another root moves the ranks by the system's symmetry (:meth:`System.shift
        <tlm.system.System.shift>`), so the same schedule runs from there.

    Raises
    ------
    CollectiveError
        When the algorithm does not run ``op`` or does not fit the system, saying why, or for
        a root that is not a chip of the system.
    """
    why = unfit(algorithm, op, system)
    if why is not None:
        raise CollectiveError(f"algorithm {algorithm} does not fit {system.name}: it {why}")
    if isinstance(root, bool) or not isinstance(root, int) or not 0 <= root < system.chips:
        raise CollectiveError(f"root must be a chip 0..{system.chips - 1}, not {root!r}")

    def make():
        schedule = ALGORITHMS[algorithm].build(op, system)
        schedule.check()
        return schedule

    schedule = system.cached(("schedule", algorithm, op), make)
    start = schedule.chips[schedule.root]
    if op != "broadcast" or root == start:
        return schedule

    def moved():
        chips = tuple(system.shift(c, start, root) for c in schedule.chips)
        return dataclasses.replace(schedule, chips=chips)

    return system.cached(("schedule", algorithm, op, root), moved)


def choose(op: str, system, size_bytes: int) -> str:
    """The algorithm ``auto`` picks for ``op`` of ``size_bytes`` on ``system``."""
    if op in ("all_to_all", "permute"):
        return "mesh"
    if system.nodes > 1:
        if op == "all_reduce":
            return "hierarchical"
        return "ring" if op == "broadcast" else _rings_or_ring(op, system)
    if size_bytes < AUTO_MESH_BELOW_BYTES:
        return "mesh"
    if op == "broadcast":
        return "ring"
    if size_bytes < AUTO_RDH_BELOW_BYTES and unfit("rdh", op, system) is None:
        return "rdh"
    if size_bytes >= AUTO_RDH_BELOW_BYTES and unfit("kangaring", op, system) is None:
        return "kangaring"
    return _rings_or_ring(op, system)


def _rings_or_ring(op: str, system) -> str:
    """Where the documented choice does not fit: the torus-native rings of rings (a ring per
    dimension, nodes over EFA the last - the runtime's hierarchical composition), or the one
    ring over every rank off a torus or round a failed link (its snake is re-laid to avoid
    it)."""
    if unfit("rings", op, system) is None and not system.failed:
        return "rings"
    return "ring"
