"""The collective model against published nccom-test measurements (``collectives.toml``).

Each section of the data file is one published sweep. The model runs every row with the
system, operation, format and algorithm the section names (the published algorithm mapped to
the model's), on the chosen engine, giving the **shipped** time: the presets as they are, no
parameter touched. Then two parameters are **calibrated** per section, each physical and named:

* ``op_fixed_s`` - a fixed cost per operation, beyond the schedule's per-step costs (the
  runtime's launch and synchronisation; the presets have none);
* ``bandwidth_factor`` - the bandwidth transfers achieve over the links' preset figures (DMA
  and protocol efficiency; 1 in the presets).

Each row's time splits into the schedule's fixed part ``F`` (its time with empty chunks) and
its bandwidth part ``B`` (the rest), so the calibrated time is
``op_fixed_s + F + B / bandwidth_factor``. The two parameters are solved from the section's two
``fit`` rows (the smallest and the largest size), and every other row is **judged**: its error
is reported, and the mean and max over the judged rows. A row's error is
``model / measured - 1``.

Examples
--------
>>> sections = validate()
>>> [s.name.split(":")[0] for s in sections]
['trn2', 'trn1']
>>> s = sections[0]
>>> round(s.op_fixed_s * 1e6, 1), round(s.bandwidth_factor, 3)
(295.9, 0.335)
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from importlib import resources
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..collectives import ALGORITHMS, Analytic, build
from ..collectives.flow import Flow
from ..formats import get_format
from ..system import load_system
from .row import CollectiveDetail, ValidationRow

__all__ = ["ENGINES", "SectionResult", "load_file", "validate"]

#: Engines a validation may run.
ENGINES = ("analytic", "flow")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PublishedRow(_Strict):
    """One published measurement of the data file."""

    size_bytes: int = Field(ge=1)
    time_us: float = Field(gt=0)
    algorithm: str = ""
    source: str


class Section(_Strict):
    """One published sweep and how the model runs it."""

    name: str
    system: str
    ranks_per_chip: int = Field(ge=1)
    op: Literal["all_reduce", "reduce_scatter", "all_gather", "all_to_all", "permute"]
    format: str
    algorithms: dict[str, str]
    fit: list[int] = Field(min_length=2, max_length=2)
    rows: list[PublishedRow] = Field(min_length=3)

    @model_validator(mode="after")
    def _check(self):
        sizes = [r.size_bytes for r in self.rows]
        for size in self.fit:
            if size not in sizes:
                raise ValueError(f"fit must name sizes of the rows, not {size}")
        for row in self.rows:
            if row.algorithm not in self.algorithms:
                raise ValueError(
                    f"algorithms must map every row's algorithm, not miss {row.algorithm!r}"
                )
        for model in self.algorithms.values():
            if model not in ALGORITHMS:
                raise ValueError(f"algorithms must map to {', '.join(ALGORITHMS)}, not {model!r}")
        get_format(self.format)
        return self


class ValidationFile(_Strict):
    sources: dict[str, str]
    section: list[Section]

    @model_validator(mode="after")
    def _check(self):
        for section in self.section:
            for row in section.rows:
                if row.source not in self.sources:
                    raise ValueError(f"source must be a key of [sources], not {row.source!r}")
        return self


def load_file() -> ValidationFile:
    """The published figures (``tlm/validation/collectives.toml``), validated."""
    text = resources.files(__package__).joinpath("collectives.toml").read_text()
    return ValidationFile.model_validate(tomllib.loads(text))


@dataclass(frozen=True)
class SectionResult:
    """One section: its calibrated parameters and every row (seconds)."""

    name: str
    system: str
    ranks_per_chip: int
    op_fixed_s: float
    bandwidth_factor: float
    rows: tuple[ValidationRow, ...]

    def errors(self, which: str, role: str | None = None) -> np.ndarray:
        """Absolute errors of ``which`` (``shipped`` or ``calibrated``) over the rows of
        ``role`` (all when None)."""
        return np.array(
            [
                abs(getattr(r, f"{which}_error_fraction"))
                for r in self.rows
                if role is None or r.role == role
            ]
        )


def _time(cost, size, itemsize) -> float:
    return float(cost.time_s(np.array([size], dtype=np.int64), itemsize)[0])


def _run_section(section: Section, engine: str) -> SectionResult:
    path = resources.files(__package__).joinpath(section.system)
    system = load_system(str(path) if section.system.endswith(".toml") else section.system)
    itemsize = get_format(section.format).dtype.itemsize
    costs = {}
    parts = []
    for row in section.rows:
        name = section.algorithms[row.algorithm]
        if name not in costs:
            cost = Analytic(build(name, section.op, system), system)
            costs[name] = Flow(cost.schedule, system, cost) if engine == "flow" else cost
        cost = costs[name]
        shipped = _time(cost, row.size_bytes, itemsize)
        fixed = float(cost.run(0.0)) if engine == "flow" else float(cost.total_fixed_s)
        if engine == "analytic" and not cost.chain:
            fixed = _time(cost, 0, itemsize)
        parts.append((name, shipped, fixed, shipped - fixed))
    # solve op_fixed_s + F + B z = measured on the two fit rows (z = 1 / bandwidth_factor)
    at = [next(i for i, r in enumerate(section.rows) if r.size_bytes == s) for s in section.fit]
    (a, b) = at
    ya = section.rows[a].time_us * 1e-6 - parts[a][2]
    yb = section.rows[b].time_us * 1e-6 - parts[b][2]
    if parts[b][3] == parts[a][3]:
        raise ValueError(f"fit rows of {section.name!r} must differ in their bandwidth part")
    z = (yb - ya) / (parts[b][3] - parts[a][3])
    if not z > 0:
        raise ValueError(
            f"fit rows of {section.name!r} give a bandwidth factor that is not positive "
            f"(1/{z:g}): the larger size must take longer"
        )
    op_fixed = ya - parts[a][3] * z
    rows = []
    for i, (row, (name, shipped, fixed, moving)) in enumerate(
        zip(section.rows, parts, strict=True)
    ):
        rows.append(
            ValidationRow(
                suite="collectives",
                section=section.name.split(":")[0],
                case=f"{row.size_bytes} B, {row.algorithm or '-'} (model: {name})",
                system=system.name,
                quantity="time_s",
                role="fit" if i in at else "judge",
                published=row.time_us * 1e-6,
                shipped=shipped,
                calibrated=op_fixed + fixed + moving * z,
                source=row.source,
                detail=CollectiveDetail(
                    size_bytes=row.size_bytes, algorithm=row.algorithm, model_algorithm=name
                ),
            )
        )
    return SectionResult(
        section.name, system.name, section.ranks_per_chip, op_fixed, 1 / z, tuple(rows)
    )


def validate(engine: str = "analytic") -> list[SectionResult]:
    """Every section of the data file against the model on ``engine``."""
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {', '.join(ENGINES)}, not {engine!r}")
    return [_run_section(section, engine) for section in load_file().section]
