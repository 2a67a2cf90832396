"""``trnsim collective``: a collective operation on a server, an UltraServer or N of them over
EFA - time, algorithm bandwidth and bus bandwidth per size, as nccom-test prints them.

The system (``--system``: ``server`` or ``ultraserver`` of the ``--preset`` chip, a system
preset or file, ``NxSYSTEM`` for N joined by EFA) is a graph of chips and links
(:mod:`tlm.system`); the operation (``--op``) by the algorithm (``--algo``, or ``auto`` by size
as the Neuron runtime documents) is a schedule (:mod:`tlm.collectives`); the engine
(``--engine``) times it: ``analytic`` (alpha-beta per step with shared links counted, closed
forms), ``flow`` (every transfer a flow sharing links max-min fairly, steps overlapping as
their dependencies allow; one event-driven run per size) or ``flit`` (packets on the
cycle-exact torus model, one simulation per size: a server or an UltraServer, small sizes). By
default a Trainium preset runs nccom-test's ranks (``--lnc``: 4 a trn2 chip) through the Neuron
runtime's costs that ``trnsim validate`` judges (``--runtime``); ``--no-runtime`` times the
links alone, one rank a chip. See docs/collectives.md.

Examples
--------
>>> from tlm.studies import run_study
>>> r = run_study("collective", sizes="1MiB,1GiB").results  # 64 ranks of a trn2 server
>>> [(p.algorithm, round(p.busbw_Bps / 1e9)) for p in r.series]
[('rdh', 10), ('kangaring', 111)]
>>> r = run_study("collective", sizes="1MiB,1GiB", runtime=False).results  # the links alone
>>> [(p.algorithm, round(p.busbw_Bps / 1e9)) for p in r.series]
[('rdh', 100), ('kangaring', 1001)]
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import BaseModel, Field

from ..collectives import ALGOS, COLLECTIVE_FORMATS, OPS, Analytic, build, choose, unfit
from ..collectives.algorithms import ALGORITHMS
from ..collectives.flit import MAX_SENT_BYTES, VCS, FlitEngine, FlitEngineError, flit_links
from ..collectives.flow import Flow
from ..collectives.groups import (
    GroupError,
    group_systems,
    parse_replica_groups,
    run_together,
    strided,
)
from ..collectives.packets import ORDERS
from ..collectives.runtime import Placement, PlacementError, RuntimeCosts
from ..collectives.trace import write_collective_trace
from ..datafile import read_text
from ..formats import get_format
from ..presets import PRESETS
from ..system import SystemSpecError, load_system, system_names
from .preset import PresetInputs
from .protocol import (
    InputError,
    Results,
    Study,
    figure,
    format_field,
    plot_path,
    register,
    writable_path,
)

__all__ = [
    "CollectiveInputs",
    "CollectiveResults",
    "CollectivePoint",
    "collective_study",
    "parse_sizes",
]

#: Engines of the study.
ENGINES = ("analytic", "flow", "flit")
#: Virtual channels per link the flit engine's routers can have (2 per lane).
FLIT_VCS = (2, 4, 8)
#: Figure formats ``--plot`` writes.
_FAIL_ALLOWED = "chip pairs A-B joined by a link, comma-separated, e.g. 0-1 or 0-1,5-9"
#: Most sizes one run may sweep.
MAX_SIZES = 4096
_UNITS = {
    "": 1,
    "b": 1,
    "k": 1 << 10,
    "kib": 1 << 10,
    "m": 1 << 20,
    "mib": 1 << 20,
    "g": 1 << 30,
    "gib": 1 << 30,
    "t": 1 << 40,
    "tib": 1 << 40,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
}
_SIZES_ALLOWED = (
    "sizes in bytes, FROM..TO[:FACTOR] (each size FACTOR times the last, 2 unless given) or a "
    "comma-separated list, e.g. 8B..4GiB, 1KiB..1GiB:4, 1MiB,64MiB; units B, KiB (K), MiB "
    "(M), GiB (G), TiB (T), and decimal KB, MB, GB, TB"
)


def parse_sizes(
    text: str, field: str = "sizes", allowed: str = _SIZES_ALLOWED, units=None
) -> list[int]:
    """Byte sizes of a ``--sizes`` text (or any whole numbers of a range-or-list input
    ``field``, with its own ``allowed`` text and ``units``: a dict of suffix to factor).

    Examples
    --------
    >>> parse_sizes("8B..64B"), parse_sizes("1KiB..1MiB:32"), parse_sizes("1MB,2M")
    ([8, 16, 32, 64], [1024, 32768, 1048576], [1000000, 2097152])

    Raises
    ------
    InputError
        On ``field``, for text that is not a range or a list of sizes.
    """
    units = _UNITS if units is None else units

    def _size(part: str) -> int:
        match = re.fullmatch(r"\s*(\d+)\s*([A-Za-z]*)\s*", part)
        if not match or match[2].lower() not in units:
            raise InputError(field, part, allowed)
        return int(match[1]) * units[match[2].lower()]

    if ".." in text:
        span, _, factor_text = text.partition(":")
        low_text, _, high_text = span.partition("..")
        low, high = _size(low_text), _size(high_text)
        if not factor_text:
            factor = 2
        elif factor_text.strip().isdigit():
            factor = int(factor_text)
        else:
            raise InputError(field, text, allowed)
        if factor < 2 or low < 1 or high < low:
            raise InputError(field, text, allowed + " (FROM >= 1, TO >= FROM, FACTOR >= 2)")
        out = [low]
        while out[-1] * factor <= high and len(out) <= MAX_SIZES:
            out.append(out[-1] * factor)
    else:
        out = [_size(part) for part in text.split(",") if part.strip()]
    if not out or len(out) > MAX_SIZES:
        raise InputError(field, text, allowed + f" (1..{MAX_SIZES} sizes)")
    return out


class CollectiveInputs(PresetInputs):
    """Inputs of ``trnsim collective``."""

    deprecated = {"fail_link": "fail_links"}

    system: str = Field(
        "server",
        description="the system: server or ultraserver of the chip preset, a system preset or "
        "file, or NxSYSTEM for N of them joined by EFA (e.g. 4xserver)",
        json_schema_extra={"allowed": system_names()},
    )
    op: Literal[OPS] = Field("all_reduce", description="collective operation (nccom-test names)")
    sizes: str = Field(
        "8B..4GiB",
        description="buffer sizes in bytes: a range FROM..TO[:FACTOR] or a list",
        json_schema_extra={"allowed": _SIZES_ALLOWED},
    )
    algo: Literal[ALGOS] = Field(
        "auto", description="algorithm; auto picks by size as the Neuron runtime documents"
    )
    format: str = format_field(
        "bf16", COLLECTIVE_FORMATS, description="element format of the buffers"
    )
    engine: Literal[ENGINES] = Field(
        "analytic",
        description="analytic: alpha-beta per step with shared links counted; flow: every "
        "transfer a flow sharing links max-min fairly, steps overlapping as their dependencies "
        "allow; flit: packets on the cycle-exact torus model (a server or an UltraServer, sizes "
        "whose busiest rank sends at most 2 MiB)",
    )
    vcs: int = Field(
        VCS,
        description="--engine flit: virtual channels per link of the routers (vcs / 2 lanes; "
        "a source's packets take the lanes in turn)",
        json_schema_extra={"allowed": ", ".join(map(str, FLIT_VCS))},
    )
    order: Literal[ORDERS] = Field(
        "transfer",
        description="--engine flit: how a step's packets join their injection queues: "
        "transfer (each transfer's packets in a row) or packet (the queue's transfers take "
        "turns one packet each)",
    )
    runtime: bool | None = Field(
        None,
        description="charge the Neuron runtime: nccom-test's ranks on the cores of each chip, "
        "their DMA queues, and the per-operation and per-step costs of the chip preset's "
        "[collectives], fitted to published runs (docs/collectives.md); off: one rank per "
        "chip, links only",
        json_schema_extra={
            "unset": "on with --ranks, --nodes or --lnc, or where the chip preset has "
            "[collectives]; off with --engine flit or a broadcast --root other than 0"
        },
    )
    ranks: int | None = Field(
        None,
        description="nccom-test -r: ranks on the first chips of each node, cores / lnc a chip",
        json_schema_extra={
            "allowed": "a multiple of nodes x ranks a chip, 2 or more",
            "unset": "every rank of the system (without --runtime: one a chip)",
        },
    )
    nodes: int | None = Field(
        None,
        description="nccom-test -N: the nodes the ranks are divided over",
        json_schema_extra={"unset": "every node of the system"},
    )
    lnc: int | None = Field(
        None,
        description="logical core size: physical cores per rank",
        json_schema_extra={"unset": "the chip preset's (trn2: 2; without --runtime: all cores)"},
    )
    custom_replica_groups: str = Field(
        "none",
        description="nccom-test --custom-replica-groups: a JSON file of replica groups, "
        '{"replica_groups": [[[0, 1, ...], [...], ...]]}; every group runs the operation on '
        "its ranks at the same time, sizes per group member",
        json_schema_extra={"allowed": "none (one group of every rank), or a JSON file"},
    )
    data_parallel_dimension: int | None = Field(
        None,
        description="nccom-test --data-parallel-dimension D: ranks / D groups of D ranks, rank "
        "i in group i mod (ranks / D), all at once; with --custom-replica-groups, its groups' "
        "size",
        json_schema_extra={
            "allowed": "a divisor of the ranks, 2 or more",
            "unset": "every rank (one group), or the size of --custom-replica-groups' groups",
        },
    )
    root: int = Field(0, description="the chip a broadcast starts from", ge=0)
    fail_links: list[str] = Field(
        default_factory=list,
        description="links that have failed, as chip pairs A-B (torus neighbours): routes go "
        "round them; algorithms that need them stop",
        json_schema_extra={"allowed": _FAIL_ALLOWED, "unset": "none"},
    )
    plot: str | None = Field(
        None, description="write a figure of bus bandwidth and time against size (PNG, SVG, PDF)"
    )
    trace: str | None = Field(
        None,
        description="write a Chrome/Perfetto JSON trace of the largest size on the flow engine: "
        "a track per chip (its steps) and per link (the transfers crossing it)",
    )

    def resolve(self) -> CollectiveInputs:
        chip = self.spec.name if self.spec.name in PRESETS else None
        placement = self._placement(self.system_graph(chip))
        if placement != (self.runtime, self.ranks, self.nodes, self.lnc):
            runtime, ranks, nodes, lnc = placement
            update = {"runtime": runtime, "ranks": ranks, "nodes": nodes, "lnc": lnc}
            return self.model_copy(update=update).resolve()
        system = self.run_system(chip)
        if self.root >= system.chips:
            raise InputError("root", self.root, f"a chip of {system.name}: 0..{system.chips - 1}")
        if self.root and self.op != "broadcast":
            raise InputError("root", self.root, "0 unless --op broadcast", "has no meaning here")
        plot_path("plot", self.plot)
        writable_path("trace", self.trace)
        sizes = parse_sizes(self.sizes)
        itemsize = get_format(self.format).dtype.itemsize
        shared = self.op in ("reduce_scatter", "all_gather", "all_to_all")
        group = self.group_systems(system)[0]
        if self.data_parallel_dimension != group.chips:
            return self.model_copy(update={"data_parallel_dimension": group.chips}).resolve()
        step = itemsize * group.chips if shared else itemsize
        if "sizes" not in self.model_fields_set and any(size % step for size in sizes):
            # the default sweep starts at the op's smallest buffer (a size it can split)
            start = step * -(-sizes[0] // step)
            return self.model_copy(update={"sizes": f"{start}B..4GiB"}).resolve()
        for size in sizes:
            if size % step:
                why = (
                    f"{group.chips} ranks x {itemsize} B of {self.format}"
                    if shared
                    else (f"{itemsize} B of {self.format}")
                )
                raise InputError(
                    "sizes", size, f"multiples of {step} B ({why}) for {self.op}", "is not allowed"
                )
        if self.algo != "auto":
            why = unfit(self.algo, self.op, group)
            if why is not None:
                fitting = [a for a in ALGORITHMS if unfit(a, self.op, group) is None]
                raise InputError(
                    "algo",
                    self.algo,
                    "auto or one of " + ", ".join(fitting) if fitting else "none fits",
                    f"does not fit --op {self.op} on --system {self.system} (it {why})",
                )
        elif system.chips < 2:
            raise InputError("system", self.system, "a system of 2 or more chips")
        if self.vcs not in FLIT_VCS:
            raise InputError("vcs", self.vcs, "one of " + ", ".join(map(str, FLIT_VCS)))
        if self.engine == "flit":
            if group is not system:
                raise InputError(
                    "engine", self.engine, f"analytic or flow with --{self._groups_flag}"
                )
            self._check_flit(system, sizes, itemsize)
        else:
            for name, default in (("vcs", VCS), ("order", "transfer")):
                if getattr(self, name) != default:
                    raise InputError(
                        name,
                        getattr(self, name),
                        f"{default} unless --engine flit",
                        "has no meaning here",
                    )
        return self

    def _check_flit(self, system, sizes, itemsize):
        """The flit engine runs one torus node, and simulates every flit: small sizes only."""
        if system.failed:
            raise InputError(
                "fail_links",
                self.fail_links,
                "none with --engine flit (its routers route by dimension order and cannot go "
                "round a failed link; --engine analytic or flow can)",
            )
        try:
            flit_links(system)
        except FlitEngineError as error:
            why = str(error).split(" for the flit engine, not ")[1]
            raise InputError(
                "system",
                self.system,
                "server or ultraserver (one torus node) for --engine flit",
                f"is not allowed: {why}",
            ) from None
        for size in sizes:
            name = self.algo if self.algo != "auto" else choose(self.op, system, size)
            factor = build(name, self.op, system).send_factor()
            if size * factor > MAX_SENT_BYTES:
                most = int(MAX_SENT_BYTES / factor) // itemsize * itemsize
                raise InputError(
                    "sizes",
                    size,
                    f"sizes up to {most} B for --engine flit with {name} (the busiest rank "
                    f"sends at most {MAX_SENT_BYTES >> 20} MiB: size x {factor:g})",
                )

    def replica_groups(self, system) -> tuple | None:
        """The replica groups over the ranks of ``system`` (the resolved run system), or None
        for one group of every rank (:mod:`tlm.collectives.groups`).

        Raises
        ------
        InputError
            On ``custom_replica_groups`` or ``data_parallel_dimension``.
        """
        ranks, dimension = system.chips, self.data_parallel_dimension
        if self.custom_replica_groups != "none":
            path = self.custom_replica_groups
            try:
                groups = parse_replica_groups(read_text(path, GroupError), ranks)
            except GroupError as error:
                text = str(error).removeprefix(f"{path}: ")
                raise InputError(
                    "custom_replica_groups",
                    path,
                    "none, or a JSON file of replica groups",
                    f"is wrong: {text}",
                ) from None
            if dimension is not None and dimension != len(groups[0]):
                raise InputError(
                    "data_parallel_dimension",
                    dimension,
                    f"unset or {len(groups[0])} (the size of --custom-replica-groups' groups)",
                )
            return groups
        if dimension is None or dimension == ranks:
            return None
        try:
            return strided(ranks, dimension)
        except GroupError as error:
            raise InputError(
                "data_parallel_dimension", dimension, f"a divisor of the {ranks} ranks, 2 or more"
            ) from error

    @property
    def _groups_flag(self) -> str:
        """The input the replica groups came from."""
        if self.custom_replica_groups != "none":
            return "custom_replica_groups"
        return "data_parallel_dimension"

    def group_systems(self, system) -> list:
        """Each replica group's sub-system of ``system`` (``[system]`` without groups)."""
        groups = self.replica_groups(system)
        if groups is None:
            return [system]
        if self.root:
            raise InputError("root", self.root, "0 with replica groups")
        try:
            return system.cached(("groups", groups), lambda: group_systems(system, groups))
        except GroupError as error:
            flag = self._groups_flag
            value = getattr(self, flag)
            raise InputError(flag, value, "groups of one shape", f"is wrong: {error}") from None

    def system_graph(self, chip=None):
        """The system these inputs name, without the failed links (:func:`system_input`)."""
        return system_input(self.system, chip, self.fail_links)

    def _placement(self, system) -> tuple:
        """``(runtime, ranks, nodes, lnc)`` resolved: with the runtime, nccom-test's placement
        (:meth:`Placement.of <tlm.collectives.runtime.Placement.of>`); without, one rank a
        chip of the whole system (other values refused)."""
        given = {"ranks": self.ranks, "nodes": self.nodes, "lnc": self.lnc}
        runtime = self.runtime
        if runtime is None:  # what validate judges, where the preset has it and it applies
            runtime = any(v is not None for v in given.values()) or (
                self.spec.collectives is not None and self.engine != "flit" and not self.root
            )
        if not runtime:
            one = {"ranks": system.chips, "nodes": system.nodes, "lnc": int(self.spec.chip.cores)}
            for name, value in given.items():
                if value is not None and value != one[name]:
                    raise InputError(
                        name, value, f"{one[name]} without --runtime (one rank a chip, links only)"
                    )
            return False, one["ranks"], one["nodes"], one["lnc"]
        if self.spec.collectives is None:
            raise InputError(
                "runtime", True, "off for a chip preset with no [collectives] (runtime costs)"
            )
        try:
            where = Placement.of(system, self.spec, **given)
        except PlacementError as error:
            raise InputError(error.field, error.value, error.allowed) from None
        lnc = int(self.spec.chip.cores) // where.ranks_per_chip
        return True, where.ranks, where.nodes, lnc

    def run_system(self, chip=None):
        """What the schedules run between (resolved inputs): the system's chips, or with the
        runtime its ranks (:class:`tlm.collectives.runtime.RankSystem`)."""
        system = self.system_graph(chip)
        if not self.runtime:
            return system
        if self.engine == "flit":
            raise InputError(
                "engine",
                self.engine,
                "analytic or flow with --runtime (the flit engine runs one rank a chip, links "
                "only)",
            )
        if self.root:
            raise InputError("root", self.root, "0 with --runtime")
        return _rank_system(system, self.spec, self.ranks, self.nodes, self.lnc)


def _rank_system(system, spec, ranks, nodes, lnc):
    """The ranks of a (checked) placement on ``system``, kept with it."""
    where = Placement.of(system, spec, ranks, nodes, lnc)
    key = ("ranks", where)
    costs = RuntimeCosts.of(spec)
    return system.cached(key, lambda: where.rank_system(system, costs))


def system_input(spec: str, chip=None, fail_links=()):
    """The system a ``--system`` input names (:func:`tlm.system.load_system`), without the
    links a ``--fail-links`` input names (chip pairs ``"A-B"``); errors name the input.

    Raises
    ------
    InputError
        On ``system`` or ``fail_links``.
    """
    try:
        system = load_system(spec, chip)
    except SystemSpecError as error:
        text = str(error)
        match = re.fullmatch(r"system must (?:be )?(.+), not .+", text)
        if match:
            raise InputError("system", spec, match[1]) from None
        raise InputError("system", spec, system_names(), f"fails: {text}") from None
    if not fail_links:
        return system
    pairs = []
    for part in fail_links:
        match = re.fullmatch(r"\s*(\d+)\s*-\s*(\d+)\s*", part)
        if not match:
            raise InputError("fail_links", part, _FAIL_ALLOWED)
        pair = (int(match[1]), int(match[2]))
        if any(not c < system.chips for c in pair):
            raise InputError(
                "fail_links",
                part,
                f"chip pairs A-B of chips 0..{system.chips - 1} joined by a link",
                f"names a chip outside {system.name}",
            )
        pairs.append(pair)
    try:
        failed = system.without(pairs)
        for a in range(failed.chips):  # a route round all chips: each reaches every other
            failed.path(a, (a + 1) % failed.chips)
    except SystemSpecError as error:
        match = re.fullmatch(r"(?:chip|fail_link) must (?:be )?(.+?), not (.+)", str(error))
        allowed = match[1] if match else _FAIL_ALLOWED
        why = match[2] if match else ""
        cut = why.startswith("links that cut")
        problem = "is not allowed" + (
            f": they would{why.removeprefix('links that')}" if cut else ""
        )
        value = fail_links[0] if len(fail_links) == 1 else fail_links
        raise InputError("fail_links", value, allowed, problem) from None
    return failed


class CollectivePoint(BaseModel):
    """One size, as nccom-test reports it."""

    size_bytes: int
    count: int = Field(description="elements per rank buffer")
    type: str = Field(description="element format")
    time_s: float
    algbw_Bps: float = Field(description="size / time")
    busbw_Bps: float = Field(description="algbw x the algorithm's bus factor")
    algorithm: str


class CollectiveResults(Results):
    """The system's size and one row per buffer size (``series``)."""

    ranks: int
    nodes: int
    ranks_per_chip: int
    links: int
    step_fixed_s: float = Field(
        description="fixed cost per step: the runtime's with --ranks, else the system preset's"
    )
    op_fixed_s: float = Field(description="the runtime's cost per operation (0 without --ranks)")
    runtime: str = Field(description="where the runtime costs come from (none: links only)")
    hbm_Bps: float = Field(
        description="each chip's HBM bandwidth, shared by the steps' reads and writes (the chip "
        "preset's, published; 0 without the runtime: not charged)"
    )
    groups: int = Field(description="replica groups running the operation at once")
    group_ranks: int = Field(description="ranks of each group (every rank without groups)")
    failed_links: str = Field(description="the failed links (chip pairs), or none")
    detoured_transfers: int = Field(
        description="transfers of the schedules used whose route goes round a failed link"
    )
    series: list[CollectivePoint] = Field(default=[], exclude=True)


def collective_study(inputs: CollectiveInputs) -> CollectiveResults:
    """Time the operation at every size with the chosen engine."""
    chip = inputs.spec.name if inputs.spec.name in PRESETS else None
    system = inputs.run_system(chip)
    runtime = getattr(system, "costs", None)
    op_fixed = runtime.fixed_s(inputs.op) if runtime is not None else 0.0
    fmt = get_format(inputs.format)
    itemsize = fmt.dtype.itemsize
    sizes = np.array(parse_sizes(inputs.sizes), dtype=np.int64)
    subs = inputs.group_systems(system)
    names = [
        inputs.algo if inputs.algo != "auto" else choose(inputs.op, subs[0], int(s)) for s in sizes
    ]
    times = np.empty(len(sizes))
    factor = {}
    for name in dict.fromkeys(names):
        schedule, key = _run_schedule(inputs, system, subs, name)
        cost = system.cached(("analytic", *key), lambda s=schedule: Analytic(s, system))
        if inputs.engine == "flow":
            cost = system.cached(("flow", *key), lambda c=cost: Flow(c.schedule, system, c))
        elif inputs.engine == "flit":
            cost = system.cached(
                ("flit", *key, inputs.vcs, inputs.order),
                lambda c=cost: FlitEngine(
                    c.schedule, system, c, vcs=inputs.vcs, order=inputs.order
                ),
            )
        factor[name] = schedule.send_factor()  # each group's ranks send as the group's own
        pick = np.array([n == name for n in names])
        times[pick] = op_fixed + cost.time_s(sizes[pick], itemsize)
    points = []
    for size, name, time_s in zip(sizes.tolist(), names, times.tolist(), strict=True):
        algbw = size / time_s
        points.append(
            CollectivePoint(
                size_bytes=size,
                count=size // itemsize,
                type=fmt.name,
                time_s=time_s,
                algbw_Bps=algbw,
                busbw_Bps=algbw * factor[name],
                algorithm=name,
            )
        )
    results = CollectiveResults(
        ranks=system.chips,
        nodes=system.nodes,
        ranks_per_chip=getattr(system, "ranks_per_chip", 1),
        links=len(system.links),
        step_fixed_s=system.step_fixed_s,
        op_fixed_s=op_fixed,
        hbm_Bps=float(getattr(system, "hbm_Bps", None) or 0.0),
        runtime=(
            f"the {inputs.spec.name} preset's [collectives]" if runtime is not None else "none"
        ),
        failed_links=", ".join(f"{a}-{b}" for a, b in _chips(system).failed) or "none",
        groups=len(subs),
        group_ranks=subs[0].chips,
        detoured_transfers=sum(
            detours(_run_schedule(inputs, system, subs, n)[0], system) for n in dict.fromkeys(names)
        ),
        series=points,
    )
    if inputs.plot is not None:
        write_plot(inputs, results, system)
    if inputs.trace is not None:
        largest = int(np.argmax(sizes))
        schedule, key = _run_schedule(inputs, system, subs, names[largest])
        cost = system.cached(("analytic", *key), lambda: Analytic(schedule, system))
        flow = system.cached(("flow", *key), lambda: Flow(cost.schedule, system, cost))
        chunk = float(cost.chunk_bytes(sizes[largest : largest + 1], itemsize)[0])
        write_collective_trace(flow, chunk, inputs.trace)
    return results


def _run_schedule(inputs, system, subs, name):
    """The schedule of ``name`` that runs on ``system`` - every replica group's at once
    (:func:`tlm.collectives.groups.run_together`) - and its cache key."""
    groups = None if len(subs) == 1 and subs[0] is system else tuple(s.members for s in subs)
    key = (name, inputs.op, inputs.root, groups)

    def make():
        one = build(name, inputs.op, subs[0], inputs.root)
        return one if groups is None else run_together(one, subs)

    return system.cached(("schedule", *key), make), key


def _chips(system):
    """The system of chips under a rank system (the system itself otherwise)."""
    return getattr(system, "chips_system", system)


def detours(schedule, system) -> int:
    """Transfers of ``schedule`` whose route goes round a failed link of ``system``."""
    chips = schedule.chips
    return sum(
        system.detoured(chips[t.src], chips[t.dst])
        for step in schedule.steps
        for t in step.transfers
    )


def write_plot(inputs: CollectiveInputs, results: CollectiveResults, system) -> Path:
    """The figure ``--plot`` asks for: this run's rows, a curve per algorithm used."""
    names = dict.fromkeys(p.algorithm for p in results.series)
    runs = [(name, [p for p in results.series if p.algorithm == name]) for name in names]
    engine = inputs.engine
    if engine == "flit":
        engine += f" {inputs.vcs} VCs, {inputs.order} order"
    title = f"{inputs.op} of {inputs.format} on {system.name} ({engine} engine, algo {inputs.algo})"
    return plot_series(runs, title, inputs.plot)


def plot_series(runs, title: str, path) -> Path:
    """Bus bandwidth and time against size, one curve per ``(label, points)`` of ``runs``
    (:class:`CollectivePoint` s), written to ``path`` (matplotlib; the format by suffix)."""
    with figure(path, ncols=2, figsize=(11, 4.2), save={"dpi": 110}) as (fig, (bw, tm)):
        for label, pts in runs:
            size = [p.size_bytes for p in pts]
            bw.plot(size, [p.busbw_Bps / 1e9 for p in pts], "o-", ms=3, label=label)
            tm.plot(size, [p.time_s * 1e6 for p in pts], "o-", ms=3, label=label)
        for ax in (bw, tm):
            ax.set_xscale("log", base=2)
            ax.set_xlabel("size (bytes)")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=8)
        bw.set_ylabel("bus bandwidth (GB/s)")
        tm.set_yscale("log")
        tm.set_ylabel("time (us)")
        fig.suptitle(title)
    return Path(path)


def schedules(inputs: CollectiveInputs, results: CollectiveResults):
    """Per algorithm used: its steps, transfers and bus factor."""
    chip = inputs.spec.name if inputs.spec.name in PRESETS else None
    system = inputs.run_system(chip)
    subs = inputs.group_systems(system)
    rows = []
    for name in dict.fromkeys(p.algorithm for p in results.series):
        s = _run_schedule(inputs, system, subs, name)[0]
        transfers = sum(len(step.transfers) for step in s.steps)
        row = (name, len(s.steps), transfers, s.chunks, round(s.send_factor(), 4))
        rows.append(row + ((detours(s, system),) if _chips(system).failed else ()))
    columns = ("algorithm", "steps", "transfers", "chunks", "busbw / algbw")
    if _chips(system).failed:
        columns += (f"round {results.failed_links}",)
    where = system.name + (
        f", {len(subs)} groups of {subs[0].chips} at once" if len(subs) > 1 else ""
    )
    return [(f"schedules of {inputs.op} on {where}", columns, rows)]


STUDY = register(
    Study(
        "collective",
        CollectiveInputs,
        collective_study,
        tables=schedules,
    )
)
