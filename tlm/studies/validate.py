"""``trnsim validate``: the model against published measurements, every row's error.

``--suite collectives`` runs every published nccom-test sweep of ``tlm/validation/
collectives.toml`` on the collective model (:mod:`tlm.validation.collectives`): the error of
each row with the presets as shipped, then with two named parameters per sweep
(``op_fixed_s``, ``bandwidth_factor``) fitted on its smallest and largest rows and every other
row judged. See docs/validation.md.

Examples
--------
>>> from tlm.studies import run_study
>>> r = run_study("validate").results
>>> r.rows, r.judged_rows, round(r.judged_max_error_fraction, 2)
(36, 32, 0.68)
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import BaseModel, Field

from ..validation.collectives import ENGINES, validate
from .protocol import Inputs, Results, Study, register

__all__ = ["ValidateInputs", "ValidateResults", "ValidationRow", "validate_study"]

#: Suites of published measurements.
SUITES = ("collectives",)


class ValidateInputs(Inputs):
    """Inputs of ``trnsim validate``."""

    suite: Literal[SUITES] = Field("collectives", description="which published measurements")
    engine: Literal[ENGINES] = Field(
        "analytic", description="the collective engine the model runs (analytic or flow)"
    )


class ValidationRow(BaseModel):
    """One published measurement against the model."""

    section: str = Field(description="the published sweep")
    size_bytes: int
    algorithm: str = Field(description="as published (empty: not printed)")
    model_algorithm: str = Field(description="what the model runs for it")
    role: str = Field(description="fit: calibrates the two parameters; judge: is judged")
    measured_s: float
    shipped_s: float = Field(description="the model with the presets as shipped")
    calibrated_s: float = Field(description="the model with the section's fitted parameters")
    shipped_error_fraction: float = Field(description="shipped / measured - 1")
    calibrated_error_fraction: float = Field(description="calibrated / measured - 1")
    source: str


class ValidateResults(Results):
    """Mean and max absolute errors; one row per published measurement (``series``)."""

    sections: int
    rows: int
    judged_rows: int
    judged_mean_error_fraction: float = Field(description="calibrated, over the judged rows")
    judged_max_error_fraction: float = Field(description="calibrated, over the judged rows")
    shipped_mean_error_fraction: float = Field(description="as shipped, over every row")
    shipped_max_error_fraction: float = Field(description="as shipped, over every row")
    series: list[ValidationRow] = Field(default_factory=list, exclude=True)


def validate_study(inputs: ValidateInputs) -> ValidateResults:
    sections = validate(inputs.engine)
    rows = [
        ValidationRow(
            section=s.name.split(":")[0],
            size_bytes=r.size_bytes,
            algorithm=r.algorithm,
            model_algorithm=r.model_algorithm,
            role=r.role,
            measured_s=r.measured_s,
            shipped_s=r.shipped_s,
            calibrated_s=r.calibrated_s,
            shipped_error_fraction=r.shipped_error,
            calibrated_error_fraction=r.calibrated_error,
            source=r.source,
        )
        for s in sections
        for r in s.rows
    ]
    judged = np.concatenate([s.errors("calibrated", "judge") for s in sections])
    shipped = np.concatenate([s.errors("shipped") for s in sections])
    return ValidateResults(
        sections=len(sections),
        rows=len(rows),
        judged_rows=len(judged),
        judged_mean_error_fraction=float(judged.mean()),
        judged_max_error_fraction=float(judged.max()),
        shipped_mean_error_fraction=float(shipped.mean()),
        shipped_max_error_fraction=float(shipped.max()),
        series=rows,
    )


def parameters(inputs: ValidateInputs, results: ValidateResults):
    """Per published sweep: the fitted parameters and its judged errors."""
    rows = []
    for s in validate(inputs.engine):
        judged = s.errors("calibrated", "judge")
        rows.append(
            (
                s.name,
                s.system,
                s.ranks_per_chip,
                f"{s.op_fixed_s * 1e6:.1f}",
                f"{s.bandwidth_factor:.3f}",
                f"{judged.mean():.1%}",
                f"{judged.max():.1%}",
            )
        )
    columns = (
        "published sweep",
        "model system",
        "ranks/chip",
        "op_fixed (us)",
        "bandwidth factor",
        "judged mean |err|",
        "judged max |err|",
    )
    return [("fitted on each sweep's smallest and largest rows", columns, rows)]


STUDY = register(
    Study(
        "validate",
        "the model against published measurements: the error of every row, mean and max",
        ValidateInputs,
        validate_study,
        tables=parameters,
    )
)
