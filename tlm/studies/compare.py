"""``trnsim compare``: one inference workload on several generations of hardware, one replica
of one server each, with each generation's footing printed beside its figures.

``--hardware`` (the baseline) and each of ``--against`` run ``trnsim infer``'s estimate on
one server's chips (tensor parallel over them: trn1, trn2 and trn3 Gen1 16, trn3 Gen2 4, A100
and H100 8), the same model, formats, batch and request lengths. The ratios are per chip
(decode tokens/s) and per dollar (generated tokens per dollar of cloud time) against
``--hardware``. The footing of each row says where its costs come from, so a ratio between a
fitted and a borrowed or assumed footing is never read as like for like: the GEMM costs (the
chip TLM's calibration, or a GPU's fitted efficiency), the inference fixed costs (fitted on
that hardware's published runs, borrowed from another generation's fit, or assumed) and the
hourly price (its source key: ``ASSUMED`` where no price is published).

Examples
--------
>>> from tlm.studies import run_study
>>> r = run_study("compare", model="llama3-8b", against="h100", prompt=512, output=64)
>>> [(row.hardware, row.chips, row.fixed_costs_footing) for row in r.results.series]
[('trn2', 16, 'FITTED'), ('h100', 8, 'FITTED')]
>>> r.results.series[0].chip_throughput_ratio
1.0
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from ..hardware import HARDWARE
from .hardware import DEPRECATED as HARDWARE_DEPRECATED
from .hardware import HARDWARE_ALLOWED, hardware_field
from .infer import _FORMATS, InferInputs
from .protocol import (
    STUDIES,
    InputError,
    Inputs,
    Results,
    Study,
    execute,
    flag,
    format_field,
    register,
    validate_inputs,
)
from .workload import served_model_field, workload_input

__all__ = ["CompareInputs", "CompareResults", "CompareRow", "compare_study"]

#: What ``--against`` lists by default: every other generation shipped.
DEFAULT_AGAINST = ",".join(h for h in HARDWARE if h != "trn2")


class CompareInputs(Inputs):
    """Inputs of ``trnsim compare``."""

    deprecated = dict(HARDWARE_DEPRECATED)

    model: str = served_model_field("llama3.3-70b")
    hardware: str = hardware_field()
    against: str = Field(
        DEFAULT_AGAINST,
        description="the hardware compared with --hardware (the ratios' baseline), comma-separated",
        json_schema_extra={"allowed": "a comma-separated list of " + HARDWARE_ALLOWED},
    )
    format: str = format_field("bf16", _FORMATS, "format of the weights and GEMM inputs")
    kv_format: str | None = format_field(None, _FORMATS, "format of the KV cache", unset="--format")
    prompt: int = Field(2048, ge=1, le=1_000_000, description="prompt tokens per request")
    output: int = Field(256, ge=1, le=1_000_000, description="generated tokens per request")
    batch: int = Field(1, ge=1, le=100_000, description="requests served together")

    def names(self) -> list[str]:
        """The baseline, then the hardware compared with it, each once."""
        others = [n.strip() for n in self.against.split(",")]
        names = [self.hardware, *others]
        if not all(others) or len(set(names)) != len(names):
            raise InputError(
                "against",
                self.against,
                "a comma-separated list of hardware, each once and not --hardware",
            )
        return names

    def resolve(self) -> CompareInputs:
        workload_input(self.model)
        InferInputs(hardware=self.hardware).device()  # an unknown name or bad file: its line
        for name in self.names()[1:]:
            try:
                InferInputs(hardware=name).device()
            except InputError as error:
                raise InputError("against", name, error.allowed, error.problem) from None
        return self.model_copy(update={"kv_format": self.kv_format or self.format})


class CompareRow(BaseModel):
    """One hardware's replica (None where the model does not fit it: ``why`` says)."""

    hardware: str
    chips: int = Field(description="one server's: the replica's tensor-parallel size")
    fits: bool
    ttft_s: float | None = None
    tpot_s: float | None = None
    chip_tokens_per_s: float | None = Field(None, description="decode tokens/s per chip")
    cost_per_million_tokens_usd: float | None = None
    energy_per_token_j: float | None = None
    chip_throughput_ratio: float | None = Field(None, description="against --hardware")
    tokens_per_usd_ratio: float | None = Field(None, description="against --hardware")
    gemm_footing: str = Field("-", description="where the GEMM costs come from")
    fixed_costs_footing: str = Field("-", description="FITTED, BORROWED from another fit, ASSUMED")
    price_footing: str = Field(description="the source of the cloud instance's hourly price")
    why: str = Field("", description="why a replica does not fit, else empty")


class CompareResults(Results):
    """Every hardware's row (``series``) and the baseline of the ratios."""

    baseline: str
    fitting: int = Field(description="hardware the replica fits")
    series: list[CompareRow] = Field(default_factory=list, exclude=True)


def _gemm_footing(source: str) -> str:
    """``chip TLM trn2`` or ``roofline x 0.6371 FITTED``: the first clause of a costs source."""
    head = source.split(",", 1)[0].split(" (", 1)[0]
    return head.replace("roofline: peak x efficiency", "roofline x")


def _fixed_footing(source: str) -> str:
    """``FITTED``, ``BORROWED`` or ``ASSUMED``, from a fixed-costs source."""
    for word in ("FITTED", "BORROWED", "ASSUMED"):
        if word in source:
            return word
    return source


def compare_study(inputs: CompareInputs) -> CompareResults:
    """``infer`` on one server of each hardware; ratios against the first."""
    rows = []
    for name in inputs.names():
        hw = InferInputs(hardware=name).device()
        chips = hw.server_chips
        price = hw.sources["instance_usd_per_hour"].rsplit(": ", 1)[-1]
        values = dict(
            model=inputs.model,
            hardware=name,
            tp=chips,
            format=inputs.format,
            kv_format=inputs.kv_format,
            prompt=inputs.prompt,
            output=inputs.output,
            batch=inputs.batch,
        )
        infer = STUDIES["infer"]
        try:  # as trnsim infer runs it: every check, a model's error on the input it names
            r = execute(infer, validate_inputs(infer, values)).results
        except InputError as error:  # the replica does not fit this hardware: a row says why
            why = error.message(flag(error.field))
            rows.append(
                CompareRow(hardware=name, chips=chips, fits=False, price_footing=price, why=why)
            )
            continue
        rows.append(
            CompareRow(
                hardware=name,
                chips=r.chips,
                fits=True,
                ttft_s=r.ttft_s,
                tpot_s=r.tpot_s,
                chip_tokens_per_s=r.decode_tokens_per_s / r.chips,
                cost_per_million_tokens_usd=r.cost_per_million_tokens_usd,
                energy_per_token_j=r.energy_per_token_j,
                gemm_footing=_gemm_footing(r.costs_source),
                fixed_costs_footing=_fixed_footing(r.fixed_costs_source),
                price_footing=price,
            )
        )
    base = rows[0]
    for row in rows:
        if row.fits and base.fits:
            row.chip_throughput_ratio = row.chip_tokens_per_s / base.chip_tokens_per_s
            row.tokens_per_usd_ratio = (
                base.cost_per_million_tokens_usd / row.cost_per_million_tokens_usd
            )
    return CompareResults(baseline=base.hardware, fitting=sum(r.fits for r in rows), series=rows)


STUDY = register(Study("compare", CompareInputs, compare_study))
