"""One published measurement against the model: the row every validation suite returns.

The three suites (:mod:`~tlm.validation.collectives`, :mod:`~tlm.validation.training`,
:mod:`~tlm.validation.inference`) each give one :class:`ValidationRow` per published figure:
what was measured, the published value, the model as shipped and calibrated, their errors,
whether the row fits the suite's parameters or is judged, and its source. What only one suite
knows about a row (a collective's size and algorithms, a training run's layout, an inference
row's id and load) is its typed :attr:`ValidationRow.detail`. ``trnsim validate`` renders the
rows as they are (the detail left out of the JSON: the case says it in words).

Examples
--------
>>> row = ValidationRow(
...     suite="collectives", section="trn2", case="1048576 B, ring (model: ring)",
...     system="trn2-server", quantity="time_s", role="judge", published=2e-4, shipped=1e-4,
...     calibrated=2.2e-4, source="NCCOM",
...     detail=CollectiveDetail(size_bytes=1048576, algorithm="ring", model_algorithm="ring"))
>>> round(row.shipped_error_fraction, 3), round(row.calibrated_error_fraction, 3)
(-0.5, 0.1)
>>> sorted(row.model_dump())[:3]
['calibrated', 'calibrated_error_fraction', 'case']
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field

__all__ = ["ValidationRow", "CollectiveDetail", "TrainingDetail", "InferenceDetail", "SUITES"]

#: The validation suites, in the order ``trnsim validate --suite all`` runs them.
SUITES = ("collectives", "training", "inference")


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CollectiveDetail(_Frozen):
    """A published nccom-test row: its size and algorithm, and the model's algorithm."""

    size_bytes: int
    algorithm: str = Field(description="as published ('' when not given)")
    model_algorithm: str = Field(description="the schedule the model runs for it")


class TrainingDetail(_Frozen):
    """A published training run: its model file, its index among the file's runs, its layout."""

    model: str
    run: int
    layout: str = Field(description="tp, pp, dp, cp, micro-batch, recomputation, sp")
    note: str
    memory_bytes: float = Field(description="the model's memory per chip for the layout")
    hbm_bytes: float = Field(description="the chip's HBM")

    @property
    def fits(self) -> bool:
        """Whether the published layout fits the chip in the model (a run that trained
        must)."""
        return self.memory_bytes <= self.hbm_bytes


class InferenceDetail(_Frozen):
    """A published inference figure: its id in ``inference.toml``, model, reliability mark,
    how its load was modelled (``""``: one request alone) and the bare model's figure."""

    id: str
    model: str
    reliability: str
    load: str = ""
    bare: float = Field(
        0.0, description="the model with no fixed cost, collectives at the modelled bandwidth"
    )


class ValidationRow(_Frozen):
    """One published measurement against the model.

    ``published``, ``shipped`` and ``calibrated`` are in the unit of ``quantity`` (seconds,
    FLOP/s per chip, tokens per second); the errors are fractions (``model / published - 1``).
    """

    suite: Literal[SUITES]
    section: str = Field(description="the published table or sweep")
    case: str = Field(description="the row: a size and algorithm, or a model and layout")
    system: str = Field(description="what the model ran it on: a system or a hardware file")
    quantity: str = Field(
        description="what was published: time_s, step_time_s, flop_per_s_per_chip, ttft_s, ..."
    )
    role: Literal["fit", "judge"] = Field(
        description="fit: calibrates the suite's parameters; judge: is judged"
    )
    published: float
    shipped: float = Field(
        description="the model as shipped: the fitted values its files hold (before this run's fit)"
    )
    calibrated: float = Field(description="the model with the fitted parameters")
    source: str
    detail: CollectiveDetail | TrainingDetail | InferenceDetail = Field(exclude=True)

    @computed_field(description="shipped / published - 1")
    @property
    def shipped_error_fraction(self) -> float:
        return self.shipped / self.published - 1

    @computed_field(description="calibrated / published - 1")
    @property
    def calibrated_error_fraction(self) -> float:
        return self.calibrated / self.published - 1
