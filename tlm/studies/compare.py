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
from ..hardware.prices import PRICE_KINDS, PRICES_FILE, price_footing
from .hardware import DEPRECATED as HARDWARE_DEPRECATED
from .hardware import (
    HARDWARE_ALLOWED,
    PRICE_ALLOWED,
    hardware_field,
    price_field,
    with_price_footing,
)
from .infer import _FORMATS, InferInputs
from .protocol import (
    MAX_REQUEST_TOKENS,
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
    prompt: int = Field(2048, ge=1, le=MAX_REQUEST_TOKENS, description="prompt tokens per request")
    output: int = Field(
        256,
        ge=2,
        le=MAX_REQUEST_TOKENS,
        description="generated tokens per request (2 or more: the generations are compared on "
        "their decode)",
    )
    batch: int = Field(1, ge=1, le=100_000, description="requests served together")
    price: str = price_field()

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
        if self.price not in PRICE_KINDS:
            raise InputError("price", self.price, PRICE_ALLOWED)
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
    bandwidth_ratio: float | None = Field(
        None, description="published HBM bandwidth per chip, against --hardware"
    )
    peak_ratio: float | None = Field(
        None, description="published dense peak per chip in --format, against --hardware"
    )
    prefill_ratio: float | None = Field(
        None, description="prefill tokens/s per chip, against --hardware"
    )
    decode_hbm_use_fraction: float | None = Field(
        None, description="share of decode time the chips stream HBM at their bandwidth"
    )
    decode_fixed_fraction: float | None = Field(
        None, description="share of decode time in per-step fixed costs"
    )
    prefill_mfu_fraction: float | None = Field(None, description="prefill FLOPs over the peak's")
    order: str = Field(
        "",
        description="where decode or prefill per chip does not follow the published bandwidth "
        "or peak's order against --hardware, why (else empty)",
    )
    gemm_footing: str = Field("-", description="where the GEMM costs come from")
    fixed_costs_footing: str = Field("-", description="FITTED, BORROWED from another fit, ASSUMED")
    why: str = Field("", description="why a replica does not fit, else empty")


CompareRow = with_price_footing(CompareRow)


class CompareResults(Results):
    """Every hardware's row (``series``) and the baseline of the ratios."""

    baseline: str
    fitting: int = Field(description="hardware the replica fits")
    series: list[CompareRow] = Field(default=[], exclude=True)


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
    published = {}  # hardware -> (HBM bandwidth, dense peak in the format), per chip
    for name in inputs.names():
        hw = InferInputs(hardware=name).device()
        chips = hw.server_chips
        price = price_footing(hw)
        if inputs.price in {p.kind for p in hw.prices}:
            price = price_footing(hw.priced(inputs.price))
        else:  # no such price published for this instance: a row that says so
            why = f"no {inputs.price} price is published for {hw.instance} ({PRICES_FILE})"
            rows.append(CompareRow(hardware=name, chips=chips, fits=False, why=why, **price))
            continue
        values = dict(
            model=inputs.model,
            hardware=name,
            tp=chips,
            format=inputs.format,
            kv_format=inputs.kv_format,
            prompt=inputs.prompt,
            output=inputs.output,
            batch=inputs.batch,
            price=inputs.price,
        )
        infer = STUDIES["infer"]
        try:  # as trnsim infer runs it: every check, a model's error on the input it names
            r = execute(infer, validate_inputs(infer, values)).results
        except InputError as error:  # the replica does not fit this hardware: a row says why
            why = error.message(flag(error.field))
            rows.append(CompareRow(hardware=name, chips=chips, fits=False, why=why, **price))
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
                decode_hbm_use_fraction=r.decode_hbm_utilisation_fraction,
                decode_fixed_fraction=min(r.step_fixed_s / r.tpot_s, 1.0) if r.tpot_s else 0.0,
                prefill_mfu_fraction=r.prefill_mfu_fraction,
                **price,
            )
        )
        published[name] = (hw.hbm_bandwidth_Bps, hw.peak_flops(inputs.format))
    base = rows[0]
    for row in rows:
        if row.fits and base.fits:
            row.chip_throughput_ratio = row.chip_tokens_per_s / base.chip_tokens_per_s
            row.tokens_per_usd_ratio = (
                base.cost_per_million_tokens_usd / row.cost_per_million_tokens_usd
            )
            _order(row, base, published)
    return CompareResults(baseline=base.hardware, fitting=sum(r.fits for r in rows), series=rows)


#: Ratios within this of each other count as the same order (the model's 1.02x against a
#: published 0.98x is a tie, not a reversal).
ORDER_TIE = 0.05


def _order(row: CompareRow, base: CompareRow, published: dict) -> None:
    """Fill ``row``'s published ratios and prefill ratio against ``base``, and ``order``: for
    decode and prefill, where the model's per-chip ratio and the published figure's (HBM
    bandwidth; dense peak) fall on opposite sides of 1, the mechanism's figures that differ.

    Per chip, decode tokens/s is the bandwidth times the share of the time HBM streams (the
    bytes a token reads are the model's, the same on any hardware), and prefill tokens/s the
    peak times the MFU (its FLOPs likewise): a reversal is always a difference of those shares,
    and the row says which and what else takes the decode's time (per-step fixed costs; the
    rest is collectives and compute)."""
    (bw, peak), (bw0, peak0) = published[row.hardware], published[base.hardware]
    row.bandwidth_ratio, row.peak_ratio = bw / bw0, peak / peak0
    row.prefill_ratio = row.peak_ratio * row.prefill_mfu_fraction / base.prefill_mfu_fraction
    notes = []
    if _reversed(row.chip_throughput_ratio, row.bandwidth_ratio):
        use, fixed = row.decode_hbm_use_fraction, row.decode_fixed_fraction
        use0, fixed0 = base.decode_hbm_use_fraction, base.decode_fixed_fraction
        notes.append(
            f"decode {row.chip_throughput_ratio:.2f}x {base.hardware}'s per chip against "
            f"{row.bandwidth_ratio:.2f}x its HBM bandwidth: HBM streams {use:.0%} of the "
            f"decode (fixed costs {fixed:.0%}) against {use0:.0%} ({fixed0:.0%}) on "
            f"{row.chips} and {base.chips} chips"
        )
    if _reversed(row.prefill_ratio, row.peak_ratio):
        mfu, mfu0 = row.prefill_mfu_fraction, base.prefill_mfu_fraction
        notes.append(
            f"prefill {row.prefill_ratio:.2f}x per chip against {row.peak_ratio:.2f}x the "
            f"peak: MFU {mfu:.0%} against {mfu0:.0%}"
        )
    row.order = "; ".join(notes)


def _reversed(model: float, published: float) -> bool:
    """The model's ratio and the published one on opposite sides of 1, beyond a tie."""
    return (model - 1.0) * (published - 1.0) < 0 and abs(model / published - 1.0) > ORDER_TIE


STUDY = register(Study("compare", CompareInputs, compare_study))
