"""The collective model against published nccom-test measurements (``collectives.toml``).

Each section of the data file is one published sweep: the command, the chip generation
(``platform``) whose calibration it belongs to, the system, ranks, nodes and logical core size
it ran with, and the reading where the docs are silent. Every row runs **as shipped**: the
schedule over the ranks (:class:`tlm.collectives.runtime.RankSystem`) with the runtime costs of
the platform's chip preset (``[collectives]``), which ``tools/calibrate_collectives.py`` fitted
once per platform on the rows marked ``fit`` (at most a third of the platform's rows, checked on
load) - so the figures judged are the figures ``trnsim collective`` gives. A row's error is
``model / measured - 1``; :func:`summary` gives the mean and max over the fit and the judged
rows of each platform. Where a sweep's placement is not published, its judged error under each
other reading the data file gives (``alternatives``) is shown beside, with the same presets.
Published tables the model cannot express are listed with the reason.

Examples
--------
>>> sections = validate()
>>> sorted({s.platform for s in sections})
['trn1', 'trn2']
>>> len(load_file().unexpressed) > 0
True
"""

from __future__ import annotations

import dataclasses
import re
import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..collectives import ALGORITHMS, Analytic, build, choose, unfit
from ..collectives.flow import Flow
from ..collectives.groups import check_groups, group_systems, run_together
from ..collectives.runtime import RUNTIME_FIGURES, Placement, RankSystem, RuntimeCosts
from ..formats import get_format
from ..presets import load_preset
from ..system import load_system
from .row import CollectiveDetail, ValidationRow

__all__ = [
    "ENGINES",
    "PARAMETER_COLUMNS",
    "RELEASE_COLUMNS",
    "SectionResult",
    "CONTRADICTION_COLUMNS",
    "Contradiction",
    "ContradictionResult",
    "by_release",
    "calibrate",
    "contradiction_rows",
    "contradictions",
    "load_file",
    "parameter_rows",
    "release_rows",
    "row_times",
    "summary",
    "validate",
]

#: Engines a validation may run.
ENGINES = ("analytic", "flow")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PublishedRow(_Strict):
    """One published measurement of the data file."""

    size_bytes: int = Field(ge=1)
    time_us: float = Field(gt=0)
    algorithm: str = ""
    fit: bool = False
    source: str


class Reading(_Strict):
    """Another reading of where or how a sweep ran, for its error under it to be shown
    beside: a logical core size, the chips of the node its ranks take (default: the first),
    the algorithm every row ran (``auto``: the model's pick), and/or another system file of
    the same chips (a file of this package: another reading of an unpublished link figure)."""

    reading: str
    lnc: int | None = Field(None, ge=1)
    chips: list[int] | None = None
    algorithm: str | None = None
    system: str | None = Field(None, pattern=r"^[\w.-]+\.toml$")

    @model_validator(mode="after")
    def _check(self):
        if self.algorithm not in (None, "auto", *ALGORITHMS):
            raise ValueError(
                f"algorithm must be auto or {', '.join(ALGORITHMS)}, not {self.algorithm!r}"
            )
        return self


class Section(_Strict):
    """One published sweep and how the model runs it."""

    name: str
    command: str
    platform: str
    system: str
    ranks: int = Field(ge=2)
    nodes: int = Field(ge=1)
    lnc: int = Field(ge=1)
    op: Literal["all_reduce", "reduce_scatter", "all_gather", "all_to_all", "permute"]
    format: str
    statistic: Literal["p50", "avg"]
    reading: str
    algorithms: dict[str, str]
    rows: list[PublishedRow] = Field(min_length=1)
    alternatives: list[Reading] = []
    replica_groups: list[list[int]] | None = None

    @model_validator(mode="after")
    def _check(self):
        for row in self.rows:
            if row.algorithm not in self.algorithms:
                raise ValueError(
                    f"algorithms must map every row's algorithm, not miss {row.algorithm!r}"
                )
        for model in self.algorithms.values():
            if model != "auto" and model not in ALGORITHMS:
                raise ValueError(
                    f"algorithms must map to auto or {', '.join(ALGORITHMS)}, not {model!r}"
                )
        get_format(self.format)
        if self.replica_groups is not None:
            check_groups(self.replica_groups, self.ranks)
        return self


class Unexpressed(_Strict):
    """A published table the model cannot run yet, and why."""

    name: str
    command: str
    rows: int = Field(ge=1)
    source: str
    why: str


class RowRef(_Strict):
    """One published row: its section's name and its size."""

    section: str
    size_bytes: int = Field(ge=1)


class Contradiction(_Strict):
    """Two published rows whose order no model of the mechanisms can give: the ``lighter`` run
    does no more than the ``heavier`` one (no more ranks, chips, bytes, groups or concurrent
    work, and an algorithm the runtime says is at least as fast there: ``why``), so any model
    in which time grows with those takes no longer on it - yet it was published slower."""

    lighter: RowRef
    heavier: RowRef
    why: str


class ValidationFile(_Strict):
    sources: dict[str, str]
    section: list[Section]
    unexpressed: list[Unexpressed] = []
    contradiction: list[Contradiction] = []

    @model_validator(mode="after")
    def _check(self):
        cited = [r.source for s in self.section for r in s.rows]
        cited += [u.source for u in self.unexpressed]
        for source in cited:
            if source not in self.sources:
                raise ValueError(f"source must be a key of [sources], not {source!r}")
        by_name = {s.name: s for s in self.section}
        for pair in self.contradiction:
            found = []
            for ref in (pair.lighter, pair.heavier):
                section = by_name.get(ref.section)
                if section is None or ref.size_bytes not in {r.size_bytes for r in section.rows}:
                    raise ValueError(
                        f"contradiction rows must be published rows, not {ref.section!r} at "
                        f"{ref.size_bytes} B"
                    )
                found.append(section)
            if found[0].platform != found[1].platform or found[0].op != found[1].op:
                raise ValueError(
                    "contradiction rows must be one platform's and one operation's, not "
                    f"{found[0].name!r} and {found[1].name!r}"
                )
        for platform in {s.platform for s in self.section}:
            rows = [r for s in self.section if s.platform == platform for r in s.rows]
            fit = sum(r.fit for r in rows)
            if not 0 < 3 * fit <= len(rows):
                raise ValueError(
                    f"fit rows of {platform} must be 1 to a third of its {len(rows)} rows, "
                    f"not {fit}"
                )
        return self


@cache
def load_file() -> ValidationFile:
    """The published figures (``tlm/validation/collectives.toml``), validated."""
    text = resources.files(__package__).joinpath("collectives.toml").read_text()
    return ValidationFile.model_validate(tomllib.loads(text))


@dataclass(frozen=True)
class SectionResult:
    """One section run as shipped: every row (seconds)."""

    name: str
    platform: str
    system: str
    ranks: int
    ranks_per_chip: int
    rows: tuple[ValidationRow, ...]
    readings: tuple = ()  # (reading, mean |error|, max |error|) over the judged rows

    def errors(self, role: str | None = None) -> np.ndarray:
        """Absolute errors over the rows of ``role`` (all when None)."""
        return np.array(
            [abs(r.shipped_error_fraction) for r in self.rows if role is None or r.role == role]
        )


def _placement(section: Section, reading: Reading | None = None):
    lnc = section.lnc if reading is None or reading.lnc is None else reading.lnc
    chips = None if reading is None or reading.chips is None else tuple(reading.chips)
    system = section.system
    if reading is not None and reading.system is not None:
        system = str(resources.files(__package__).joinpath(reading.system))
    return _placed(system, section.ranks, section.nodes, lnc, chips)


@cache
def _placed(system_name: str, ranks: int, nodes: int, lnc: int, chips: tuple | None = None):
    system = load_system(system_name)
    where = Placement.of(system, load_preset(system.chip), ranks, nodes, lnc)
    if chips is None:
        return where, where.chips(system)
    if nodes != 1 or len(chips) != where.chips_per_node:
        raise ValueError(
            f"chips must be {where.chips_per_node} chips of one node for {ranks} ranks at "
            f"LNC={lnc}, not {list(chips)}"
        )
    return where, system.subset(chips)


def row_times(
    section: Section,
    costs: RuntimeCosts,
    engine: str = "analytic",
    reading: Reading | None = None,
) -> list[tuple[float, str]]:
    """The model's time (seconds) and algorithm for each row of ``section`` with the runtime
    ``costs`` (the calibration varies them; the suite passes the preset's), under the
    section's own placement and algorithms or another ``reading`` of them (where the
    algorithm does not fit that reading, ``auto``'s)."""
    where, chips = _placement(section, reading)
    ranks = RankSystem(chips, where.ranks_per_chip, costs)
    groups = _groups(section)
    group = ranks if groups is None else ranks.subset(groups[0])
    itemsize = get_format(section.format).dtype.itemsize
    out = []
    for row in section.rows:
        name = section.algorithms[row.algorithm]
        if reading is not None and reading.algorithm is not None:
            name = reading.algorithm
        if name == "auto" or unfit(name, section.op, group) is not None:
            name = choose(section.op, group, row.size_bytes)
        schedule = _schedule(section.op, name, chips, where.ranks_per_chip, groups)
        cost = Analytic(schedule, ranks)
        if engine == "flow":
            cost = Flow(cost.schedule, ranks, cost)
        sizes = np.array([row.size_bytes], dtype=np.int64)
        out.append((costs.fixed_s(section.op) + float(cost.time_s(sizes, itemsize)[0]), name))
    return out


def _groups(section: Section) -> tuple | None:
    """The section's replica groups as a key (None: one group of every rank)."""
    if section.replica_groups is None:
        return None
    return tuple(tuple(g) for g in section.replica_groups)


@cache
def _schedule(op: str, name: str, chips, ranks_per_chip: int, groups: tuple | None = None):
    """The schedule of ``op`` by ``name`` over the ranks - every replica group's at once
    (:mod:`tlm.collectives.groups`) - built once (the ranks' layout does not depend on the
    runtime costs)."""
    costs = RuntimeCosts.of(load_preset(chips.chip))
    ranks = RankSystem(chips, ranks_per_chip, costs)
    if groups is None:
        return build(name, op, ranks)
    subs = group_systems(ranks, groups)
    return run_together(build(name, op, subs[0]), subs)


def _run_section(section: Section, engine: str) -> SectionResult:
    where, chips = _placement(section)
    costs = RuntimeCosts.of(load_preset(chips.chip))
    rows = []
    for row, (time_s, name) in zip(section.rows, row_times(section, costs, engine), strict=True):
        rows.append(
            ValidationRow(
                suite="collectives",
                section=section.name.split(":")[0],
                case=f"{row.size_bytes} B, {row.algorithm or '-'} (model: {name})",
                system=f"{section.system}, {section.ranks} ranks",
                quantity="time_s",
                role="fit" if row.fit else "judge",
                published=row.time_us * 1e-6,
                shipped=time_s,
                calibrated=time_s,
                source=row.source,
                detail=CollectiveDetail(
                    size_bytes=row.size_bytes, algorithm=row.algorithm, model_algorithm=name
                ),
            )
        )
    judged = [i for i, r in enumerate(section.rows) if not r.fit]
    readings = []
    for reading in section.alternatives:
        times = row_times(section, costs, engine, reading)
        errors = [abs(times[i][0] / (section.rows[i].time_us * 1e-6) - 1) for i in judged]
        readings.append((reading.reading, float(np.mean(errors)), float(np.max(errors))))
    return SectionResult(
        section.name,
        section.platform,
        section.system,
        section.ranks,
        where.ranks_per_chip,
        tuple(rows),
        tuple(readings),
    )


def validate(engine: str = "analytic") -> list[SectionResult]:
    """Every section of the data file against the model as shipped, on ``engine``."""
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {', '.join(ENGINES)}, not {engine!r}")
    return [_run_section(section, engine) for section in load_file().section]


def summary(sections: list[SectionResult]) -> dict:
    """Per platform: rows, fit and judged rows, and the mean and max absolute error of each."""
    out = {}
    for platform in sorted({s.platform for s in sections}):
        rows = [r for s in sections if s.platform == platform for r in s.rows]
        entry = {"rows": len(rows)}
        for role in ("fit", "judge"):
            e = np.array([abs(r.shipped_error_fraction) for r in rows if r.role == role])
            entry[role] = (len(e), float(e.mean()), float(e.max()))
        out[platform] = entry
    return out


#: The columns of :func:`parameter_rows`.
PARAMETER_COLUMNS = (
    "platform",
    "reduce fixed (us)",
    "move fixed (us)",
    "step sync (us)",
    "rank DMA (GB/s)",
    "chip HBM (TB/s)",
    "fit rows (mean, max |err|)",
    "judged rows (mean, max |err|)",
)
#: The columns of :func:`release_rows`.
RELEASE_COLUMNS = ("platform", "Neuron release", "judged rows", "mean |err|", "max", "mean err")


def parameter_rows(sections: list[SectionResult]) -> list[tuple]:
    """Per platform: the preset's runtime costs as shipped (the chip's HBM bandwidth, which
    they charge, published) and its fit and judged rows (count, mean and max absolute error),
    as text (:data:`PARAMETER_COLUMNS`)."""
    rows = []
    for platform, entry in summary(sections).items():
        costs = RuntimeCosts.of(load_preset(platform))
        (nf, fit_mean, fit_max), (nj, judge_mean, judge_max) = entry["fit"], entry["judge"]
        rows.append(
            (
                platform,
                f"{costs.reduce_fixed_s * 1e6:.1f}",
                f"{costs.move_fixed_s * 1e6:.1f}",
                f"{costs.step_sync_s * 1e6:.2f}",
                f"{costs.dma_Bps / 1e9:.1f}",
                f"{costs.hbm_Bps / 1e12:.2f}",
                f"{nf} ({fit_mean:.1%}, {fit_max:.1%})",
                f"{nj} ({judge_mean:.1%}, {judge_max:.1%})",
            )
        )
    return rows


def release_rows(sections: list[SectionResult]) -> list[tuple]:
    """:func:`by_release` as text (:data:`RELEASE_COLUMNS`)."""
    return [
        (platform, version, n, f"{mean:.1%}", f"{most:.1%}", f"{bias:+.1%}")
        for (platform, version), (n, mean, most, bias) in by_release(sections).items()
    ]


def release(source: str) -> str:
    """The Neuron release a source of the data file was published with (``"2.28"``)."""
    text = load_file().sources[source]
    match = re.search(r"Neuron (\d+\.\d+)", text)
    return match[1] if match else "?"


def by_release(sections: list[SectionResult]) -> dict:
    """Per platform and Neuron release: the judged rows, their mean and max absolute error
    and their mean signed error (the model slower than measured when positive) - how far
    each runtime release sits from the one calibration of its platform."""
    out: dict = {}
    for s in sections:
        for r in s.rows:
            if r.role == "judge":
                out.setdefault((s.platform, release(r.source)), []).append(r.shipped_error_fraction)
    return {
        key: (len(e), float(np.abs(e).mean()), float(np.abs(e).max()), float(np.mean(e)))
        for key, values in sorted(out.items())
        for e in [np.array(values)]
    }


@dataclass(frozen=True)
class ContradictionResult:
    """A :class:`Contradiction` run as shipped (seconds): the published and model times of
    both rows, and ``floor``, the least max |error| of the two any model that keeps them in
    order can reach (0 when the published order is the model's)."""

    platform: str
    lighter: ValidationRow
    heavier: ValidationRow
    why: str
    lighter_sweep: str = ""
    heavier_sweep: str = ""

    @property
    def floor(self) -> float:
        light, heavy = self.lighter.published, self.heavier.published
        return max(0.0, (light - heavy) / (light + heavy))


def contradictions(sections: list[SectionResult]) -> list[ContradictionResult]:
    """Every declared contradiction of the data file with its rows as ``sections`` ran them:
    ``floor`` = (slower - faster) / (slower + faster) of the two published times, the error
    one time for both would leave on each - no model that takes no longer on the lighter run
    can miss both by less."""
    found = {(s.name, r.detail.size_bytes): (s.platform, r) for s in sections for r in s.rows}
    out = []
    for pair in load_file().contradiction:
        platform, light = found[pair.lighter.section, pair.lighter.size_bytes]
        _, heavy = found[pair.heavier.section, pair.heavier.size_bytes]
        out.append(
            ContradictionResult(
                platform, light, heavy, pair.why, pair.lighter.section, pair.heavier.section
            )
        )
    return out


#: The columns of :func:`contradiction_rows`.
CONTRADICTION_COLUMNS = (
    "platform",
    "lighter run (published us, model us)",
    "heavier run (published us, model us)",
    "why the lighter cannot be slower",
    "least max |err|",
)


def contradiction_rows(sections: list[SectionResult]) -> list[tuple]:
    """:func:`contradictions` as text (:data:`CONTRADICTION_COLUMNS`)."""

    def cell(sweep, row):
        return (
            f"{sweep.split(': ', 1)[-1]}, {row.detail.size_bytes:,} B "
            f"({row.published * 1e6:,.1f}, {row.shipped * 1e6:,.1f})"
        )

    return [
        (
            c.platform,
            cell(c.lighter_sweep, c.lighter),
            cell(c.heavier_sweep, c.heavier),
            c.why,
            f"{c.floor:.1%}",
        )
        for c in contradictions(sections)
    ]


def calibrate(platform: str) -> RuntimeCosts:
    """The runtime costs of ``platform`` that fit its ``fit`` rows best: the figures of the
    preset's ``[collectives]`` whose source is ``FITTED`` (the others held at the preset's
    values), by the least squares of ``log(model / published)`` over the fit rows
    (Levenberg-Marquardt on the figures' logarithms, so each stays positive), from the
    preset's values. What ``tools/calibrate_collectives.py`` writes into the preset.

    Raises
    ------
    ValueError
        For a platform with no section, or a preset with no fitted figure.
    """
    sections = [s for s in load_file().section if s.platform == platform]
    if not sections:
        known = sorted({s.platform for s in load_file().section})
        raise ValueError(f"platform must be one of {', '.join(known)}, not {platform!r}")
    spec = load_preset(platform)
    start = RuntimeCosts.of(spec)
    free = [n for n in RUNTIME_FIGURES if "FITTED" in spec.sources[f"collectives.{n}"].split()]
    if not free:
        raise ValueError(f"preset {platform} has no [collectives] figure whose source is FITTED")
    fit = [
        s.model_copy(update={"rows": [r for r in s.rows if r.fit]})
        for s in sections
        if any(r.fit for r in s.rows)
    ]
    published = np.log([r.time_us * 1e-6 for s in fit for r in s.rows])

    def costs_of(x) -> RuntimeCosts:
        return dataclasses.replace(start, **dict(zip(free, np.exp(x).tolist(), strict=True)))

    def residuals(x):
        model = [t for s in fit for t, _ in row_times(s, costs_of(x))]
        return np.log(model) - published

    x = np.log([getattr(start, name) for name in free])
    r, damping = residuals(x), 1e-2
    for _ in range(100):
        jacobian = np.empty((r.size, x.size))
        for j in range(x.size):
            dx = np.zeros_like(x)
            dx[j] = 1e-4
            jacobian[:, j] = (residuals(x + dx) - r) / 1e-4
        a = jacobian.T @ jacobian
        step = np.linalg.solve(a + damping * np.diag(np.diag(a) + 1e-12), -jacobian.T @ r)
        trial = residuals(x + step)
        if trial @ trial < r @ r:
            done = r @ r - trial @ trial < 1e-12 * max(r @ r, 1e-30)
            x, r, damping = x + step, trial, max(damping / 3, 1e-9)
            if done:
                break
        else:
            damping *= 5
            if damping > 1e9:
                break
    return costs_of(x)
