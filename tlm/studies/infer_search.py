"""``trnsim infer-search``: the cheapest fleet that serves ``--rate-per-s`` requests of
``--prompt + --output`` tokens within a latency SLO - over every replica layout (system, tp,
pp, ep; for a MoE model the ``--expert-layouts``: experts within the tp group or over ep chips
with data-parallel attention; the ``--micro-batches`` in flight through the pipeline), format,
KV format and batch of a model on a ``--hardware``, evaluated on Dask.

The configurations and their pricing are :func:`tlm.inference.search.search`'s (``trnsim
infer``'s model for the latency; the replicas a load needs from each one's rate within the
SLO, its batch slots as a queue, as ``trnsim serve --find-max-rate`` defines it; the instance's
``--price`` from ``tlm/hardware/prices.toml`` and the hardware's power for the cost, and the
configuration's price-performance at that rate). ``--scheduler local`` (the default) starts a
local Dask cluster, ``inline`` evaluates in this process, an address spreads the chunks over an
existing cluster; ``--out-dir`` keeps each chunk so an interrupted search resumes. An SLO no
configuration meets is an error naming the closest. The series: the cheapest configurations
meeting the SLO. ``--plot`` draws every fitting configuration's TPOT against its cost per
million tokens.

Examples
--------
>>> from tlm.studies import run_study
>>> r = run_study("infer-search", model="llama3-8b", hardware="trn2", rate_per_s=2.0,
...               prompt=512, output=64, scheduler="inline").results
>>> r.evaluated > 100, r.meeting >= 1, r.best_replicas >= 1
(True, True, True)
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, Field

from ..hardware.prices import price_footing
from ..inference import FORMATS, InferenceInputError, SloUnreachable
from ..inference.search import (
    DEFAULT_BATCHES,
    DEFAULT_MICRO_BATCHES,
    EXPERT_LAYOUTS,
    search,
)
from .hardware import DEPRECATED as HARDWARE_DEPRECATED
from .hardware import HARDWARE_ALLOWED, hardware_field, price_field, priced, with_price_footing
from .infer import OLD_FORMATS
from .protocol import (
    MAX_COUNT,
    MAX_REQUEST_TOKENS,
    PLOT_ALLOWED,
    InputError,
    Results,
    Study,
    SweepInputs,
    figure,
    loaded,
    plot_path,
    progress,
    register,
)
from .workload import served_model_field, workload_input

__all__ = ["InferSearchInputs", "InferSearchResults", "ConfigRow", "infer_search_study"]

#: The search's argument names -> this study's inputs.
_SEARCH_FIELDS = {"fmts": "formats", "kv_fmts": "kv_formats", "fmt": "formats"}
_SYSTEMS = "a comma-separated list of server, ultraserver, Nxserver, Nxultraserver"
_MICRO_BATCHES = f"a comma-separated list of integers in 1..{MAX_COUNT} and pp (as many as stages)"
#: Configurations in the series.
TOP = 20


class InferSearchInputs(SweepInputs):
    """Inputs of ``trnsim infer-search``."""

    deprecated = {**HARDWARE_DEPRECATED, "dtypes": "formats", "kv_dtypes": "kv_formats"}
    deprecated_values = {"formats": OLD_FORMATS, "kv_formats": OLD_FORMATS}

    model: str = served_model_field()
    hardware: str = hardware_field()
    systems: list[str] = Field(
        default_factory=lambda: ["server", "ultraserver"],
        min_length=1,
        description="what a replica may span (an ultraserver the hardware lacks is skipped)",
        json_schema_extra={"allowed": _SYSTEMS},
    )
    rate_per_s: float = Field(1.0, gt=0, description="the load: requests per second")
    prompt: int = Field(2048, ge=1, le=MAX_REQUEST_TOKENS, description="prompt tokens per request")
    output: int = Field(
        256, ge=1, le=MAX_REQUEST_TOKENS, description="generated tokens per request"
    )
    slo_ttft_s: float = Field(2.0, gt=0, description="time to first token allowed")
    slo_tpot_s: float = Field(0.05, gt=0, description="time per output token allowed")
    batches: list[Annotated[int, Field(ge=1, le=MAX_COUNT)]] = Field(
        default_factory=lambda: list(DEFAULT_BATCHES),
        min_length=1,
        description="batches tried",
        json_schema_extra={"allowed": f"a comma-separated list of integers in 1..{MAX_COUNT}"},
    )
    formats: list[Literal[tuple(FORMATS.values())]] = Field(
        default_factory=lambda: list(FORMATS.values()),
        min_length=1,
        description="formats of the weights and GEMM inputs tried",
    )
    kv_formats: list[Literal[tuple(FORMATS.values())]] = Field(
        default_factory=lambda: list(FORMATS.values()),
        min_length=1,
        description="formats of the KV cache tried",
    )
    expert_layouts: list[Literal[EXPERT_LAYOUTS]] = Field(
        default_factory=lambda: list(EXPERT_LAYOUTS),
        min_length=1,
        description="a MoE model's expert layouts tried: within the tp group (tp), over ep chips "
        "with data-parallel attention (dp_attention)",
    )
    micro_batches: list[Annotated[int, Field(ge=1, le=MAX_COUNT)] | Literal["pp"]] = Field(
        default_factory=lambda: list(DEFAULT_MICRO_BATCHES),
        min_length=1,
        description="micro-batches in flight through the pipeline tried per layout",
        json_schema_extra={"allowed": _MICRO_BATCHES},
    )
    price: str = price_field()
    chunk: int = Field(2000, ge=10, le=1_000_000, description="configurations per Dask task")
    plot: str | None = Field(
        None,
        description="write TPOT against cost per million tokens as a figure",
        json_schema_extra={"allowed": PLOT_ALLOWED},
    )

    def options(self) -> dict:
        """The lists of configurations these inputs name, as the search takes them."""
        return dict(
            systems=tuple(self.systems),
            batches=tuple(self.batches),
            fmts=tuple(self.formats),
            kv_fmts=tuple(self.kv_formats),
            expert_layouts=tuple(self.expert_layouts),
            micro_batches=tuple(self.micro_batches),
        )

    def device(self):
        """The hardware these inputs name, at the ``price`` they pick."""
        from ..hardware import HardwareError
        from ..inference.layout import hardware_named

        hw = loaded("hardware", self.hardware, hardware_named, HardwareError, HARDWARE_ALLOWED)
        return priced(hw, self.price)

    def resolve(self) -> InferSearchInputs:
        workload_input(self.model)
        from ..inference.layout import system_chips

        hw = self.device()
        for s in self.options()["systems"]:
            try:
                system_chips(hw, s)
            except InferenceInputError:
                if s != "ultraserver":
                    raise InputError("systems", s, _SYSTEMS) from None
        self.check_scheduler()
        plot_path("plot", self.plot)
        return self


class ConfigRow(BaseModel):
    """One configuration meeting the SLO."""

    system: str
    tp: int
    pp: int
    ep: int
    dp_attention: bool
    micro_batches: int
    format: str
    kv_format: str
    batch: int
    replicas: int
    fleet_chips: int
    ttft_s: float
    tpot_s: float
    cost_per_hour_usd: float
    cost_per_million_tokens_usd: float = Field(description="the fleet at this load")
    power_w: float
    max_rate_per_s: float = Field(
        description="requests a replica sustains within the SLO (its slots queue arrivals)"
    )
    max_rate_cost_per_million_tokens_usd: float = Field(
        description="one replica at max_rate_per_s: the configuration's price-performance"
    )


class InferSearchResults(Results):
    """The cheapest configuration meeting the SLO; the series: the cheapest ones."""

    evaluated: int = Field(description="configurations priced")
    fitting: int = Field(description="configurations that fit the chips' memory")
    meeting: int = Field(description="configurations that fit and meet the SLO")
    chunks: int
    resumed_chunks: int
    best_system: str
    best_tp: int
    best_pp: int
    best_ep: int
    best_dp_attention: bool
    best_micro_batches: int
    best_format: str
    best_kv_format: str
    best_batch: int
    best_replicas: int
    best_fleet_chips: int
    best_ttft_s: float
    best_tpot_s: float
    best_cost_per_hour_usd: float
    best_cost_per_million_tokens_usd: float
    best_power_w: float
    best_max_rate_per_s: float
    best_max_rate_cost_per_million_tokens_usd: float
    series: list[ConfigRow] = Field(default=[], exclude=True)


InferSearchResults = with_price_footing(InferSearchResults)


def _config(row: dict) -> ConfigRow:
    return ConfigRow(
        **{k: row[k] for k in ConfigRow.model_fields if k in row},
        format=FORMATS[row["fmt"]],
        kv_format=FORMATS[row["kv_fmt"]],
    )


def infer_search_study(inputs: InferSearchInputs) -> InferSearchResults:
    opts = inputs.options()
    try:
        hw = inputs.device()
        found = search(
            inputs.model,
            hw,
            rate_per_s=inputs.rate_per_s,
            prompt=inputs.prompt,
            output=inputs.output,
            slo_ttft_s=inputs.slo_ttft_s,
            slo_tpot_s=inputs.slo_tpot_s,
            scheduler=inputs.scheduler,
            workers=inputs.workers or None,
            out_dir=inputs.out_dir,
            chunk=inputs.chunk,
            progress=lambda done, total: progress(done, total, "chunks"),
            **opts,
        )
        best = found.best()
    except SloUnreachable as error:
        raise InputError(
            error.field,
            getattr(inputs, error.field),
            "an SLO some configuration meets",
            f"is not met: {error}",
        ) from None
    except InferenceInputError as error:
        field = _SEARCH_FIELDS.get(error.field, error.field)
        if field not in type(inputs).model_fields:
            raise error from None  # no input of this study: the model's own line
        raise InputError(field, getattr(inputs, field), error.allowed) from None
    a = found.arrays
    meets = a["meets"].astype(bool)
    order = [int(i) for i in a["cost_per_hour_usd"].argsort() if meets[i]][:TOP]
    results = InferSearchResults(
        evaluated=found.evaluated,
        fitting=int(a["fits"].astype(bool).sum()),
        meeting=int(meets.sum()),
        chunks=found.chunks,
        resumed_chunks=found.resumed_chunks,
        **{f"best_{k}": v for k, v in _config(best).model_dump().items()},
        series=[_config(found.row(i)) for i in order],
        **price_footing(hw),
    )
    if inputs.plot is not None:
        write_scatter(inputs, found)
    return results


def write_scatter(inputs: InferSearchInputs, found) -> Path:
    """Every fitting configuration's TPOT against its cost per million tokens, those meeting
    the SLO marked; matplotlib, the format by suffix."""
    a = found.arrays
    fits, meets = a["fits"].astype(bool), a["meets"].astype(bool)
    with figure(inputs.plot, figsize=(6, 4), save={"bbox_inches": "tight"}) as (fig, ax):
        ax.scatter(
            a["cost_per_million_tokens_usd"][fits & ~meets],
            a["tpot_s"][fits & ~meets] * 1e3,
            s=6,
            color="lightgrey",
            label="misses the SLO",
        )
        ax.scatter(
            a["cost_per_million_tokens_usd"][meets],
            a["tpot_s"][meets] * 1e3,
            s=8,
            label="meets the SLO",
        )
        ax.axhline(inputs.slo_tpot_s * 1e3, color="grey", linestyle="--", linewidth=0.8)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("$ per million output tokens (cloud)")
        ax.set_ylabel("TPOT (ms)")
        ax.set_title(
            f"{inputs.model} on {inputs.hardware}: {inputs.rate_per_s:g} req/s of "
            f"{inputs.prompt}+{inputs.output} tokens",
            fontsize=9,
        )
        ax.legend(fontsize=8)
    return Path(inputs.plot)


STUDY = register(
    Study(
        "infer-search",
        InferSearchInputs,
        infer_search_study,
    )
)
