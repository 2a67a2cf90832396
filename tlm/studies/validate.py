"""``trnsim validate``: the models against published measurements, every row's error.

Three suites (``--suite all`` runs every one):

- ``collectives``: every published nccom-test sweep of ``tlm/validation/collectives.toml`` the
  collective model expresses (:mod:`tlm.validation.collectives`), run as shipped: the ranks on
  the cores of each chip, with the runtime costs each chip preset carries (fitted once per
  generation on the rows marked fit, at most a third); every other row judged, and the tables
  not expressed listed with the reason;
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
>>> r.rows, r.judged_rows
(65, 45)
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field

from ..costs import OpCosts
from ..hardware import load_hardware
from ..validation.collectives import (
    CONTRADICTION_COLUMNS,
    ENGINES,
    PARAMETER_COLUMNS,
    RELEASE_COLUMNS,
    contradiction_rows,
    load_file,
    parameter_rows,
    release_rows,
    validate,
)
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
    training_refused_for_memory: int | None = Field(
        None, description="published training layouts the memory model says do not fit"
    )
    inference_judged_mean_error_fraction: float | None = None
    inference_judged_max_error_fraction: float | None = None
    inference_not_modelled: int | None = Field(
        None, description="published inference rows the model does not reproduce (reasons listed)"
    )
    series: list[ValidationRow] = Field(default=[], exclude=True)


def validate_study(inputs: ValidateInputs) -> ValidateResults:
    rows: list[ValidationRow] = []
    if inputs.suite in ("all", "collectives"):
        rows += [r for s in validate(inputs.engine) for r in s.rows]
    refused = None
    if inputs.suite in ("all", "training"):
        trained = validate_training()
        rows += trained.rows
        refused = len(trained.refused())
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
        training_refused_for_memory=refused,
        inference_not_modelled=(
            len(validate_inference().skipped) if inputs.suite in ("all", "inference") else None
        ),
        series=rows,
    )


def parameters(inputs: ValidateInputs, results: ValidateResults):
    """The fitted parameters of each suite run, with its judged errors."""
    tables = []
    if inputs.suite in ("all", "collectives"):
        sections = validate(inputs.engine)
        tables.append(
            (
                "collectives: the presets' runtime costs, as shipped",
                PARAMETER_COLUMNS,
                parameter_rows(sections),
            )
        )
        tables.append(
            (
                "collectives: judged errors by the runtime release that printed them",
                RELEASE_COLUMNS,
                release_rows(sections),
            )
        )
        tables.append(
            (
                "collectives: published rows no model can put in order (least max |err| left)",
                CONTRADICTION_COLUMNS,
                contradiction_rows(sections),
            )
        )
        rows = [
            (s.name, "as read (the rows above)", f"{e.mean():.1%}", f"{e.max():.1%}")
            for s in sections
            if s.readings
            for e in [s.errors("judge")]
        ]
        rows += [
            (s.name, reading, f"{mean:.1%}", f"{most:.1%}")
            for s in sections
            for reading, mean, most in s.readings
        ]
        rows.sort(key=lambda r: r[0])
        columns = ("published sweep", "reading of where or how it ran", "judged mean |err|", "max")
        tables.append(
            ("collectives: the judged errors under other readings (same presets)", columns, rows)
        )
        rows = [(u.name, u.rows, u.source, u.why) for u in load_file().unexpressed]
        columns = ("published table not expressed", "rows", "source", "why")
        tables.append(("collectives: published tables the model cannot run yet", columns, rows))
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
        for hw in sorted({r.system for r in v.rows} - set(v.parameters)):
            judged = np.array([abs(r.calibrated_error_fraction) for r in v.rows if r.system == hw])
            # the TLM's GEMMs held to the chip's published GEMM (tlm.costs.MEASURED_GEMM)
            ratio = OpCosts.for_hardware(load_hardware(hw)).gemm_hardware_ratio
            tlm = "chip TLM" if ratio == 1 else f"chip TLM x {ratio:.3f} (published GEMM)"
            rows.append(
                (
                    hw,
                    tlm,
                    "chip TLM",
                    "nothing: every row judged",
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
        rows = [
            (
                r.case,
                r.system,
                f"{r.detail.memory_bytes / 2**30:.1f}",
                f"{r.detail.hbm_bytes / 2**30:.1f}",
            )
            for r in v.refused()
        ]
        columns = ("published layout the memory model refuses", "hardware", "needs (GiB)", "HBM")
        if rows:  # the summary's count says when none is refused
            title = "training: published layouts that do not fit in the model"
            tables.append((title, columns, rows))
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
