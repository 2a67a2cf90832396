"""The Neuron runtime's part of a collective: ranks on the cores of each chip, and the costs
the links do not charge.

nccom-test runs ``ranks`` ranks (``-r``) on ``nodes`` nodes (``-N``, the ranks divided equally),
each rank a logical core of ``lnc`` physical cores, so ``cores / lnc`` ranks share a chip (trn2
at its default LNC=2: 4; trn1: 2). The ranks fill each node's first chips, chip-major (ranks
``4k .. 4k+3`` on chip ``k``): the docs number logical cores that way; which cores a run of
fewer ranks than the node has takes is not published (ASSUMED, docs/collectives.md).

:class:`RankSystem` is the system the schedules then run on: every rank a vertex, every
transfer crossing its source rank's DMA queues out and its destination rank's in (each
``dma_Bps``, whether the two ranks share a chip or not) and, between chips, the chips' route
(the links of :mod:`tlm.system`). A chip's ranks are the innermost dimension of its torus, so
every algorithm lays ranks out as it lays chips on any torus. :class:`RuntimeCosts` adds what
the runtime costs per operation (``reduce_fixed_s`` when it reduces, ``move_fixed_s`` when it
only moves data: launching and synchronising the collective-communication cores, and for a
reduction the compute engines that add) and per step (``step_sync_s``: semaphores and
descriptors, for the system file's ``step_fixed_s``); ``hbm_Bps`` a chip's HBM (:mod:`.hbm`).

Examples
--------
>>> from tlm.presets import load_preset
>>> from tlm.system import load_system
>>> server = load_system("trn2-server")
>>> where = Placement.of(server, load_preset("trn2"), ranks=16)
>>> where.ranks_per_chip, where.chips_per_node                      # LNC=2: 4 ranks a chip
(4, 4)
>>> ranks = where.rank_system(server, RuntimeCosts.of(load_preset("trn2")))
>>> ranks.chips, ranks.torus.shape, [ranks.links[i].name for i in ranks.path(3, 4)]
(16, (4, 4), ['rank 3 dma out', 'chip 0 x+', 'rank 4 dma in'])
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from ..errors import FieldError
from ..link.topology import Torus
from ..system.graph import Link
from .algorithms import CollectiveError
from .schedule import REDUCING

__all__ = [
    "Placement",
    "PlacementError",
    "RankSystem",
    "RuntimeCosts",
    "RUNTIME_FIGURES",
    "with_runtime",
]

#: The figures of a chip preset's ``[collectives]`` section the runtime costs are made of.
RUNTIME_FIGURES = ("reduce_fixed_s", "move_fixed_s", "step_sync_s", "dma_Bps")


class PlacementError(FieldError, CollectiveError):
    """A placement that is not allowed (:class:`tlm.errors.FieldError`: ``field`` - ``ranks``,
    ``nodes`` or ``lnc`` -, the ``value`` given and what is ``allowed``)."""


@dataclass(frozen=True)
class RuntimeCosts:
    """What the Neuron runtime adds to a collective's transfers, for one chip generation
    (its preset's ``[collectives]`` section; docs/collectives.md gives each figure's fit).

    Attributes
    ----------
    reduce_fixed_s, move_fixed_s : float
        Seconds per operation that reduces (all-reduce, reduce-scatter), or only moves data
        (all-gather, all-to-all, permute, broadcast).
    step_sync_s : float
        Seconds per step of the schedule.
    dma_Bps : float
        Bytes per second one rank's DMA queues move out, and in.
    lnc : int
        The default logical core size (physical cores per rank).
    hbm_Bps : float or None
        Bytes per second of one chip's HBM, which every access a step makes there shares
        (:mod:`tlm.collectives.hbm`; the chip preset's ``hbm_bandwidth_Bps``, published, not
        fitted). None: HBM traffic is not charged.
    """

    reduce_fixed_s: float
    move_fixed_s: float
    step_sync_s: float
    dma_Bps: float
    lnc: int
    hbm_Bps: float | None = None

    def __post_init__(self):
        for name in RUNTIME_FIGURES:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
                raise CollectiveError(f"{name} must be a number >= 0, not {value!r}")
        if not self.dma_Bps > 0:
            raise CollectiveError(f"dma_Bps must be a number > 0, not {self.dma_Bps!r}")
        hbm = self.hbm_Bps
        if hbm is not None and (
            isinstance(hbm, bool) or not isinstance(hbm, int | float) or not hbm > 0
        ):
            raise CollectiveError(f"hbm_Bps must be a number > 0 or None, not {hbm!r}")

    @classmethod
    def of(cls, spec) -> RuntimeCosts:
        """The runtime costs of a chip preset (:class:`tlm.presets.ChipSpec`)."""
        section = spec.collectives
        if section is None:
            raise CollectiveError(f"chip preset {spec.name} has no [collectives] section")
        return cls(
            **{name: float(getattr(section, name)) for name in RUNTIME_FIGURES},
            lnc=int(section.lnc),
            hbm_Bps=float(spec.chip.hbm_bandwidth_Bps),
        )

    def fixed_s(self, op: str) -> float:
        """The per-operation cost of ``op``."""
        return self.reduce_fixed_s if op in REDUCING else self.move_fixed_s


@dataclass(frozen=True)
class Placement:
    """Where nccom-test's ranks run: ``ranks`` over ``nodes``, ``ranks_per_chip`` on each of
    the first ``chips_per_node`` chips of every node."""

    ranks: int
    nodes: int
    ranks_per_chip: int

    @property
    def chips_per_node(self) -> int:
        return self.ranks // self.nodes // self.ranks_per_chip

    @classmethod
    def of(cls, system, spec, ranks=None, nodes=None, lnc=None) -> Placement:
        """The placement of ``ranks`` on ``nodes`` of ``system`` (default: every rank of
        every node) at logical core size ``lnc`` (default the preset's), checked.

        Raises
        ------
        PlacementError
            Naming ``ranks``, ``nodes`` or ``lnc``, the value and what is allowed.
        """
        cores = int(spec.chip.cores)
        lnc = RuntimeCosts.of(spec).lnc if lnc is None else lnc
        sizes = [k for k in range(1, cores + 1) if cores % k == 0]
        if isinstance(lnc, bool) or not isinstance(lnc, int) or lnc not in sizes:
            allowed = (
                f"one of {', '.join(map(str, sizes))} (divisors of {spec.name}'s {cores} cores)"
            )
            raise PlacementError("lnc", lnc, allowed)
        per_chip = cores // lnc
        nodes = system.nodes if nodes is None else nodes
        if isinstance(nodes, bool) or not isinstance(nodes, int) or not 1 <= nodes <= system.nodes:
            raise PlacementError(
                "nodes", nodes, f"an integer 1..{system.nodes} (nodes of {system.name})"
            )
        most = per_chip * system.chips_per_node
        ranks = most * nodes if ranks is None else ranks
        step = nodes * per_chip
        spread = f"{per_chip} ranks a chip at LNC={lnc}" + (f", {nodes} nodes" if nodes > 1 else "")
        allowed = f"a multiple of {step} ({spread}) from {max(2, step)} to {most * nodes}"
        if (
            isinstance(ranks, bool)
            or not isinstance(ranks, int)
            or ranks % (nodes * per_chip)
            or not 2 <= ranks <= most * nodes
        ):
            raise PlacementError("ranks", ranks, allowed)
        return cls(ranks, nodes, per_chip)

    def chips(self, system):
        """The chips the ranks run on: the first ``chips_per_node`` of each of the first
        ``nodes`` nodes of ``system`` (the system itself when that is all of it)."""
        per, take = system.chips_per_node, self.chips_per_node
        if self.nodes == system.nodes and take == per:
            return system
        return system.subset(n * per + c for n in range(self.nodes) for c in range(take))

    def rank_system(self, system, costs: RuntimeCosts) -> RankSystem:
        """The ranks of this placement on ``system`` as a system of their own."""
        return RankSystem(self.chips(system), self.ranks_per_chip, costs)


@dataclass(frozen=True, eq=False)
class RankSystem:
    """The ranks of a system of chips as the vertices a schedule runs between (see the module
    docstring): what the algorithms (:mod:`tlm.collectives`) and the analytic and flow engines
    read of a :class:`tlm.system.System`.

    Parameters
    ----------
    chips : tlm.system.System
        The chips the ranks run on.
    ranks_per_chip : int
    costs : RuntimeCosts
    members : tuple of int, optional
        For a group's ranks (:meth:`subset`): rank ``i`` of this system is rank
        ``members[i]`` of the one it was taken from.
    chip_ranks : int, optional
        For a group's ranks: how many ranks each chip runs in all (0: ``ranks_per_chip``, the
        group has all of them; KangaRing needs that, CCi).
    """

    chips_system: object
    ranks_per_chip: int
    costs: RuntimeCosts
    members: tuple | None = None
    chip_ranks: int = 0
    _cache: dict = field(default_factory=dict, repr=False)

    def __post_init__(self):
        rpc, chips = self.ranks_per_chip, self.chips_system
        torus = chips.torus
        if rpc > 1 and (torus is None or torus.dims < 4):
            torus = Torus((rpc, *(torus.shape if torus is not None else ())))
        elif rpc > 1:
            torus = None  # a 4-D torus of chips has no fifth dimension for the ranks
        rate = float(self.costs.dma_Bps)
        ranks = chips.chips * rpc
        extra = []
        for direction in ("out", "in"):
            for r in range(ranks):
                chip, rank = ranks + r // rpc, r
                src, dst = (rank, chip) if direction == "out" else (chip, rank)
                extra.append(Link(src, dst, rate, 0.0, f"rank {r} dma {direction}"))
        object.__setattr__(self, "_ranks", ranks)
        object.__setattr__(self, "torus", torus)
        object.__setattr__(self, "links", tuple(chips.links) + tuple(extra))

    @property
    def name(self) -> str:
        rpc = self.ranks_per_chip
        return self.chips_system.name + (f", {rpc} ranks a chip" if rpc > 1 else "")

    def subset(self, ranks) -> RankSystem:
        """The ranks of a group (a replica group, :mod:`tlm.collectives.groups`) as a rank
        system of their own: the chips they are on (:meth:`tlm.system.System.subset`), as many
        ranks on each; rank ``i`` of it is rank ``members[i]`` of this one (chip by chip, in
        the sub-system's chip order). Which of a chip's ranks a group takes does not change
        its timing: every rank of a chip has its own DMA queues and the chip's links.

        Raises
        ------
        CollectiveError
            For ranks that are not distinct ranks of this system, or not as many on each chip
            they occupy.
        """
        given = [int(r) for r in ranks]
        if (
            not given
            or len(set(given)) != len(given)
            or not all(0 <= r < self._ranks for r in given)
        ):
            raise CollectiveError(
                f"ranks must be one or more distinct ranks 0..{self._ranks - 1}, not {given}"
            )
        rpc = self.ranks_per_chip
        by_chip: dict[int, list[int]] = {}
        for r in sorted(given):
            by_chip.setdefault(r // rpc, []).append(r)
        counts = sorted({len(v) for v in by_chip.values()})
        if len(counts) != 1:
            raise CollectiveError(
                f"ranks must be as many on every chip they occupy, not {counts} "
                f"({rpc} ranks a chip)"
            )
        chips = self.chips_system.subset(by_chip)
        top = self.chips_system.members  # subsets number chips as the top system does
        local = chips.members if top is None else [top.index(m) for m in chips.members]
        members = tuple(r for c in local for r in by_chip[c])
        whole = self.chip_ranks or rpc
        return RankSystem(chips, counts[0], self.costs, members, 0 if counts[0] == whole else whole)

    @property
    def chip(self) -> str:
        return self.chips_system.chip

    @property
    def nodes(self) -> int:
        return self.chips_system.nodes

    @property
    def chips_per_node(self) -> int:
        return self.chips_system.chips_per_node * self.ranks_per_chip

    @property
    def chips(self) -> int:
        """Ranks (the vertices schedules run between)."""
        return self.nodes * self.chips_per_node

    @property
    def failed(self) -> tuple:
        return ()  # routes between chips detour round failed links (the chips' routes)

    @property
    def flit(self):
        return None

    @property
    def step_fixed_s(self) -> float:
        return self.costs.step_sync_s

    @property
    def hbm_Bps(self) -> float | None:
        """Bytes per second of each chip's HBM (None: not charged)."""
        return self.costs.hbm_Bps

    def chip_of(self, ranks) -> np.ndarray:
        """The chip (of :attr:`chips_system`) each of ``ranks`` runs on, whose HBM its
        transfers read and write."""
        return np.asarray(ranks, dtype=np.int64) // self.ranks_per_chip

    @property
    def bandwidth_Bps(self) -> np.ndarray:
        return self.cached("bandwidth", lambda: np.array([ln.bandwidth_Bps for ln in self.links]))

    @property
    def latency_s(self) -> np.ndarray:
        return self.cached("latency", lambda: np.array([ln.latency_s for ln in self.links]))

    def path(self, src: int, dst: int) -> tuple[int, ...]:
        """The links a transfer from rank ``src`` to rank ``dst`` crosses."""
        n = self._ranks
        for r in (src, dst):
            if isinstance(r, bool) or not isinstance(r, int | np.integer) or not 0 <= r < n:
                raise CollectiveError(f"rank must be an integer 0..{n - 1}, not {r!r}")
        if src == dst:
            return ()
        base = len(self.chips_system.links)
        out, into = base + int(src), base + n + int(dst)
        a, b = int(src) // self.ranks_per_chip, int(dst) // self.ranks_per_chip
        return (out, *self._route(a, b), into) if a != b else (out, into)

    def _route(self, a: int, b: int) -> tuple[int, ...]:
        """The chips' route from chip ``a`` to chip ``b`` (kept: many ranks share a pair)."""
        routes = self._cache.setdefault("routes", {})
        if (a, b) not in routes:
            routes[a, b] = self.chips_system.path(a, b)
        return routes[a, b]

    def detoured(self, src: int, dst: int) -> bool:
        """Whether the route between two ranks goes round a failed link between chips."""
        a, b = src // self.ranks_per_chip, dst // self.ranks_per_chip
        if a == b or not self.chips_system.failed:
            return False
        return self.chips_system.detoured(a, b)

    def cached(self, key, make):
        """``make()``, computed once per rank system (schedules are kept here)."""
        if key not in self._cache:
            self._cache[key] = make()
        return self._cache[key]


def with_runtime(system, spec, split: bool = False):
    """``system`` with the Neuron runtime's collective mechanisms of the chip preset ``spec``
    (its ``[collectives]``), one rank a chip: every transfer crosses its chips' DMA queues and
    each step costs ``step_sync_s`` - what the cluster network and the server TLM run
    collectives on (docs/cluster.md, "The DMA queues"). A chip's queues move at one rank's
    ``dma_Bps``: its ranks (logical cores) each carry the whole buffer of a collective of the
    dimension that spans them. With ``split``, at all its ranks' (``cores / lnc`` x
    ``dma_Bps``): a dimension outside the chip, whose buffer its ranks split. Without a
    ``[collectives]`` section, ``system``."""
    if spec.collectives is None:
        return system
    costs = RuntimeCosts.of(spec)
    if split:
        ranks = int(spec.chip.cores) // costs.lnc
        costs = dataclasses.replace(costs, dma_Bps=costs.dma_Bps * ranks)
    return RankSystem(system, 1, costs)
