"""``trnsim validate``: the models against published measurements, every row's error.

Three suites (``--suite all`` runs every one):

- ``collectives``: every published nccom-test sweep of ``tlm/validation/collectives.toml`` on
  the collective model (:mod:`tlm.validation.collectives`): the error of each row with the
  presets as shipped, then with two named parameters per sweep (``op_fixed_s``,
  ``bandwidth_factor``) fitted on its smallest and largest rows and every other row judged;
- ``training``: the published training runs of the model files (Megatron-LM SC'21 Table 1,
  Korthikanti et al. Table 5, Llama 3 405B) on the training model
  (:mod:`tlm.validation.training`): each accelerator's ``gemm_efficiency`` fitted on its
  ``fit`` rows, every other row judged;
- ``inference``: published latencies (TTFT, TPOT, end-to-end) of Trn2 (AWS Neuron tutorials) and
  H100 (TensorRT-LLM, NIM) in ``tlm/validation/inference.toml`` on the inference model
  (:mod:`tlm.validation.inference`): per system the three fixed costs (per iteration, per
  collective call, per request) and the collective bandwidth factor fitted on its ``fit``
  rows, every other modelled row judged; the rows not modelled are listed with the reason.

The series: one row per published measurement. See docs/validation.md.

Examples
--------
>>> from tlm.studies import run_study
>>> r = run_study("validate", suite="collectives").results
>>> r.rows, r.judged_rows, round(r.judged_max_error_fraction, 2)
(36, 32, 0.68)
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field

from ..validation.collectives import ENGINES, validate
from ..validation.inference import FIT as INFERENCE_FIT
from ..validation.inference import validate_inference
from ..validation.row import SUITES as SUITE_NAMES
from ..validation.row import ValidationRow
from ..validation.training import FIT, validate_training
from .protocol import Inputs, Results, Study, register

__all__ = ["ValidateInputs", "ValidateResults", "validate_study"]

#: Suites of published measurements.
SUITES = ("all", *SUITE_NAMES)


class ValidateInputs(Inputs):
    """Inputs of ``trnsim validate``."""

    suite: Literal[SUITES] = Field("all", description="which published measurements")
    engine: Literal[ENGINES] = Field(
        "analytic", description="the collective engine the collectives suite runs"
    )


class ValidateResults(Results):
    """Mean and max absolute errors; one row per published measurement (``series``)."""

    rows: int
    judged_rows: int
    judged_mean_error_fraction: float = Field(description="calibrated, over the judged rows")
    judged_max_error_fraction: float = Field(description="calibrated, over the judged rows")
    shipped_mean_error_fraction: float = Field(description="as shipped, over every row")
    shipped_max_error_fraction: float = Field(description="as shipped, over every row")
    collectives_judged_mean_error_fraction: float | None = None
    collectives_judged_max_error_fraction: float | None = None
    training_judged_mean_error_fraction: float | None = None
    training_judged_max_error_fraction: float | None = None
    inference_judged_mean_error_fraction: float | None = None
    inference_judged_max_error_fraction: float | None = None
    inference_not_modelled: int | None = Field(
        None, description="published inference rows the model does not reproduce (reasons listed)"
    )
    series: list[ValidationRow] = Field(default_factory=list, exclude=True)


def validate_study(inputs: ValidateInputs) -> ValidateResults:
    rows: list[ValidationRow] = []
    if inputs.suite in ("all", "collectives"):
        rows += [r for s in validate(inputs.engine) for r in s.rows]
    if inputs.suite in ("all", "training"):
        rows += validate_training().rows
    if inputs.suite in ("all", "inference"):
        rows += validate_inference().rows

    def errors(suite=None, role=None, shipped=False):
        return np.array(
            [
                abs(r.shipped_error_fraction if shipped else r.calibrated_error_fraction)
                for r in rows
                if suite in (None, r.suite) and role in (None, r.role)
            ]
        )

    judged = errors(role="judge")
    shipped = errors(shipped=True)
    per_suite = {}
    for suite in SUITE_NAMES:
        e = errors(suite, "judge")
        per_suite[f"{suite}_judged_mean_error_fraction"] = float(e.mean()) if e.size else None
        per_suite[f"{suite}_judged_max_error_fraction"] = float(e.max()) if e.size else None
    return ValidateResults(
        rows=len(rows),
        judged_rows=len(judged),
        judged_mean_error_fraction=float(judged.mean()),
        judged_max_error_fraction=float(judged.max()),
        shipped_mean_error_fraction=float(shipped.mean()),
        shipped_max_error_fraction=float(shipped.max()),
        **per_suite,
        inference_not_modelled=(
            len(validate_inference().skipped) if inputs.suite in ("all", "inference") else None
        ),
        series=rows,
    )


def parameters(inputs: ValidateInputs, results: ValidateResults):
    """The fitted parameters of each suite run, with its judged errors."""
    tables = []
    if inputs.suite in ("all", "collectives"):
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
        tables.append(
            ("collectives: fitted on each sweep's smallest and largest rows", columns, rows)
        )
    if inputs.suite in ("all", "training"):
        v = validate_training()
        rows = []
        for hw, params in v.parameters.items():
            judged = np.array(
                [
                    abs(r.calibrated_error_fraction)
                    for r in v.rows
                    if r.system == hw and r.role == "judge"
                ]
            )
            rows.append(
                (
                    hw,
                    f"{params['efficiency']:.3f}",
                    f"{params['call_s'] * 1e6:.1f}" if "call_s" in params else "(default 0)",
                    ", ".join(f"{m} #{i}" for m, i in FIT[hw]),
                    len(judged),
                    f"{judged.mean():.1%}",
                    f"{judged.max():.1%}",
                )
            )
        columns = (
            "hardware",
            "GEMM efficiency",
            "GEMM call (us)",
            "fitted on",
            "judged rows",
            "judged mean |err|",
            "judged max |err|",
        )
        tables.append(("training: fitted per accelerator", columns, rows))
    if inputs.suite in ("all", "inference"):
        v = validate_inference()
        rows = []
        for system, p in v.parameters.items():
            judged = np.array(
                [
                    abs(r.calibrated_error_fraction)
                    for r in v.rows
                    if r.system == system and r.role == "judge"
                ]
            )
            rows.append(
                (
                    system,
                    f"{p['step_fixed_s'] * 1e3:.2f}",
                    f"{p['collective_fixed_s'] * 1e6:.1f}",
                    f"{p['collective_bandwidth_factor']:.2f}",
                    f"{p['request_fixed_s'] * 1e3:.2f}",
                    len(INFERENCE_FIT[system]),
                    len(judged),
                    f"{judged.mean():.1%}",
                    f"{judged.max():.1%}",
                )
            )
        columns = (
            "system",
            "step fixed (ms)",
            "collective fixed (us)",
            "collective bandwidth factor",
            "request fixed (ms)",
            "fit rows",
            "judged rows",
            "judged mean |err|",
            "judged max |err|",
        )
        tables.append(("inference: fitted per system", columns, rows))
        reasons: dict = {}
        for _, why in v.skipped:
            reasons[why] = reasons.get(why, 0) + 1
        tables.append(
            ("inference: published rows not modelled", ("reason", "rows"), sorted(reasons.items()))
        )
    return tables


STUDY = register(
    Study(
        "validate",
        ValidateInputs,
        validate_study,
        tables=parameters,
    )
)
