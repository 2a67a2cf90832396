"""``trnsim collective``: a collective operation on a server, an UltraServer or N of them over
EFA - time, algorithm bandwidth and bus bandwidth per size, as nccom-test prints them.

The system (``--system``: ``server`` or ``ultraserver`` of the ``--preset`` chip, a system
preset or file, ``NxSYSTEM`` for N joined by EFA) is a graph of chips and links
(:mod:`tlm.system`); the operation (``--op``) by the algorithm (``--algo``, or ``auto`` by size
as the Neuron runtime documents) is a schedule (:mod:`tlm.collectives`); the engine
(``--engine``) times it: ``analytic`` (alpha-beta per step with shared links counted, closed
forms), ``flow`` (every transfer a flow sharing links max-min fairly, steps overlapping as
their dependencies allow; one event-driven run per size) or ``flit`` (packets on the
cycle-exact torus model, one simulation per size: a server or an UltraServer, small sizes). See
docs/collectives.md.

Examples
--------
>>> from tlm.studies import run_study
>>> r = run_study("collective", sizes="1MiB,1GiB").results
>>> [(p.algorithm, round(p.busbw_Bps / 1e9)) for p in r.series]
[('rdh', 100), ('kangaring', 1001)]
"""

from __future__ import annotations

import re
from typing import Literal

import numpy as np
from pydantic import BaseModel, Field

from ..collectives import ALGOS, COLLECTIVE_FORMATS, OPS, Analytic, build, choose, unfit
from ..collectives.algorithms import ALGORITHMS
from ..collectives.flit import MAX_SENT_BYTES, FlitEngine, FlitEngineError, flit_links
from ..collectives.flow import Flow
from ..formats import get_format
from ..presets import PRESETS
from ..system import SystemSpecError, load_system, system_names
from .protocol import InputError, PresetInputs, Results, Study, format_field, register

__all__ = [
    "CollectiveInputs",
    "CollectiveResults",
    "CollectivePoint",
    "collective_study",
    "parse_sizes",
]

#: Engines of the study.
ENGINES = ("analytic", "flow", "flit")
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


def _size(text: str) -> int:
    match = re.fullmatch(r"\s*(\d+)\s*([A-Za-z]*)\s*", text)
    if not match or match[2].lower() not in _UNITS:
        raise InputError("sizes", text, _SIZES_ALLOWED)
    return int(match[1]) * _UNITS[match[2].lower()]


def parse_sizes(text: str) -> list[int]:
    """Byte sizes of a ``--sizes`` text.

    Examples
    --------
    >>> parse_sizes("8B..64B"), parse_sizes("1KiB..1MiB:32"), parse_sizes("1MB,2M")
    ([8, 16, 32, 64], [1024, 32768, 1048576], [1000000, 2097152])

    Raises
    ------
    InputError
        On ``sizes``, for text that is not a range or a list of sizes.
    """
    if ".." in text:
        span, _, factor_text = text.partition(":")
        low_text, _, high_text = span.partition("..")
        low, high = _size(low_text), _size(high_text)
        if not factor_text:
            factor = 2
        elif factor_text.strip().isdigit():
            factor = int(factor_text)
        else:
            raise InputError("sizes", text, _SIZES_ALLOWED)
        if factor < 2 or low < 1 or high < low:
            raise InputError(
                "sizes", text, _SIZES_ALLOWED + " (FROM >= 1, TO >= FROM, FACTOR >= 2)"
            )
        out = [low]
        while out[-1] * factor <= high and len(out) <= MAX_SIZES:
            out.append(out[-1] * factor)
    else:
        out = [_size(part) for part in text.split(",") if part.strip()]
    if not out or len(out) > MAX_SIZES:
        raise InputError("sizes", text, _SIZES_ALLOWED + f" (1..{MAX_SIZES} sizes)")
    return out


class CollectiveInputs(PresetInputs):
    """Inputs of ``trnsim collective``."""

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

    def resolve(self) -> CollectiveInputs:
        chip = self.spec.name if self.spec.name in PRESETS else None
        system = self.system_graph(chip)
        sizes = parse_sizes(self.sizes)
        itemsize = get_format(self.format).dtype.itemsize
        shared = self.op in ("reduce_scatter", "all_gather", "all_to_all")
        step = itemsize * system.chips if shared else itemsize
        for size in sizes:
            if size % step:
                why = (
                    f"{system.chips} ranks x {itemsize} B of {self.format}"
                    if shared
                    else (f"{itemsize} B of {self.format}")
                )
                raise InputError(
                    "sizes", size, f"multiples of {step} B ({why}) for {self.op}", "is not allowed"
                )
        if self.algo != "auto":
            why = unfit(self.algo, self.op, system)
            if why is not None:
                fitting = [a for a in ALGORITHMS if unfit(a, self.op, system) is None]
                raise InputError(
                    "algo",
                    self.algo,
                    "auto or one of " + ", ".join(fitting) if fitting else "none fits",
                    f"does not fit --op {self.op} on --system {self.system} (it {why})",
                )
        elif system.chips < 2:
            raise InputError("system", self.system, "a system of 2 or more chips")
        if self.engine == "flit":
            self._check_flit(system, sizes, itemsize)
        return self

    def _check_flit(self, system, sizes, itemsize):
        """The flit engine runs one torus node, and simulates every flit: small sizes only."""
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

    def system_graph(self, chip=None):
        """The system these inputs name (:func:`tlm.system.load_system`)."""
        try:
            return load_system(self.system, chip)
        except SystemSpecError as error:
            text = str(error)
            match = re.fullmatch(r"system must (?:be )?(.+), not .+", text)
            if match:
                raise InputError("system", self.system, match[1]) from None
            raise InputError("system", self.system, system_names(), f"fails: {text}") from None


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
    links: int
    step_fixed_s: float = Field(description="the system preset's fixed cost per step")
    series: list[CollectivePoint] = Field(default_factory=list, exclude=True)


def collective_study(inputs: CollectiveInputs) -> CollectiveResults:
    """Time the operation at every size with the chosen engine."""
    chip = inputs.spec.name if inputs.spec.name in PRESETS else None
    system = inputs.system_graph(chip)
    fmt = get_format(inputs.format)
    itemsize = fmt.dtype.itemsize
    sizes = np.array(parse_sizes(inputs.sizes), dtype=np.int64)
    names = [
        inputs.algo if inputs.algo != "auto" else choose(inputs.op, system, int(s)) for s in sizes
    ]
    times = np.empty(len(sizes))
    factor = {}
    for name in dict.fromkeys(names):
        schedule = build(name, inputs.op, system)
        cost = system.cached(("analytic", name, inputs.op), lambda s=schedule: Analytic(s, system))
        if inputs.engine == "flow":
            cost = system.cached(
                ("flow", name, inputs.op), lambda c=cost: Flow(c.schedule, system, c)
            )
        elif inputs.engine == "flit":
            cost = system.cached(
                ("flit", name, inputs.op), lambda c=cost: FlitEngine(c.schedule, system, c)
            )
        factor[name] = schedule.send_factor()
        pick = np.array([n == name for n in names])
        times[pick] = cost.time_s(sizes[pick], itemsize)
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
    return CollectiveResults(
        ranks=system.chips,
        nodes=system.nodes,
        links=len(system.links),
        step_fixed_s=system.step_fixed_s,
        series=points,
    )


def schedules(inputs: CollectiveInputs, results: CollectiveResults):
    """Per algorithm used: its steps, transfers and bus factor."""
    chip = inputs.spec.name if inputs.spec.name in PRESETS else None
    system = inputs.system_graph(chip)
    rows = []
    for name in dict.fromkeys(p.algorithm for p in results.series):
        s = build(name, inputs.op, system)
        transfers = sum(len(step.transfers) for step in s.steps)
        rows.append((name, len(s.steps), transfers, s.chunks, round(s.send_factor(), 4)))
    columns = ("algorithm", "steps", "transfers", "chunks", "busbw / algbw")
    return [(f"schedules of {inputs.op} on {system.name}", columns, rows)]


STUDY = register(
    Study(
        "collective",
        "a collective on a server, UltraServer or N over EFA: time, algbw, busbw per size",
        CollectiveInputs,
        collective_study,
        tables=schedules,
    )
)
