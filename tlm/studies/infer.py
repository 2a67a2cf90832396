"""``trnsim infer``: ``--batch`` requests of ``--prompt`` + ``--output`` tokens on one model
replica of ``tp x pp`` chips of a ``--hardware``'s ``--system`` - TTFT, TPOT, end-to-end
latency, tokens/s per replica, chip and server, MFU and HBM-bandwidth utilisation per phase,
the time breakdown, the memory per chip and the largest batch that fits at this context.

The model is :func:`tlm.inference.estimate` (operator costs from :class:`tlm.costs.OpCosts`,
collectives from :class:`tlm.cluster.network.Network` on the system's topology, the named fixed
costs of ``tlm/inference/data/fixed_costs.toml``). ``--draft-model`` turns on speculative
decoding. ``--dp-attention`` spreads a MoE model's experts over ``--ep`` chips per stage with
attention data-parallel over ``ep / tp`` groups (all-to-all dispatch and combine);
``--micro-batches`` (default ``--pp``) keeps micro-batches in flight through the pipeline. A
model that does not fit is an error naming the part (weights, activations, KV cache) and the
shortfall. The series: each phase's time by category. See docs/inference.md.

Examples
--------
>>> from tlm.studies import run_study
>>> r = run_study("infer", model="llama3.3-70b", hardware="trn2", system="server", tp=16,
...               prompt=1024, output=64).results
>>> r.fits, r.chips, bool(r.ttft_s < r.e2e_s)
(True, 16, True)
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, Field

from ..hardware.prices import price_footing
from ..inference import (
    FORMATS,
    FixedCosts,
    InferenceDoesNotFit,
    InferenceInputError,
    ReplicaSpec,
    RequestBatch,
    Speculation,
    estimate_of,
    fixed_costs,
    token_economics,
)
from ..inference.buckets import ShapeBuckets, stack_buckets
from ..inference.layout import FIXED_COSTS, check_layout, hardware_named, system_chips
from ..workloads import WorkloadError, load_model
from .hardware import DEPRECATED as HARDWARE_DEPRECATED
from .hardware import HARDWARE_ALLOWED, hardware_field, price_field, priced, with_price_footing
from .protocol import (
    MAX_REQUEST_TOKENS,
    PLOT_ALLOWED,
    InputError,
    Inputs,
    Results,
    Study,
    figure,
    format_field,
    loaded,
    plot_path,
    register,
)
from .workload import MODEL_ALLOWED, served_model_field, workload_input

__all__ = ["OLD_FORMATS", "ReplicaInputs", "InferInputs", "InferResults", "PhaseRow", "infer_study"]

#: The formats a replica may run in: the :mod:`tlm.formats` names of
#: :data:`tlm.inference.FORMATS`; ``fp8`` is the old spelling of ``fp8_e4m3``.
_FORMATS = tuple(FORMATS.values())
OLD_FORMATS = {key: name for key, name in FORMATS.items() if key != name}
#: The estimate's argument names -> this study's inputs.
_RENAMED = {"fmt": "format", "kv_fmt": "kv_format"}
#: A phase's buckets: a stack's (nxd, none), or lengths.
_Buckets = Literal["nxd", "none"] | Annotated[list[int], Field(min_length=1)] | None
_PART_INPUT = {"weights": "tp", "activations": "prompt", "KV cache": "batch"}


class ReplicaInputs(Inputs):
    """What every inference study says of one model replica: the model, the hardware and
    system, the parallelism, the formats and the named fixed costs (``trnsim infer``,
    ``trnsim serve``)."""

    deprecated = {**HARDWARE_DEPRECATED, "dtype": "format", "kv_dtype": "kv_format"}
    deprecated_values = {"format": OLD_FORMATS, "kv_format": OLD_FORMATS}

    model: str = served_model_field()
    hardware: str = hardware_field()
    system: str = Field(
        "server",
        description="the chips the replica may use and their network: server, ultraserver, "
        "Nxserver or Nxultraserver",
        json_schema_extra={"allowed": "server, ultraserver, Nxserver or Nxultraserver"},
    )
    tp: int = Field(16, ge=1, description="tensor-parallel size (innermost)")
    pp: int = Field(1, ge=1, description="pipeline-parallel stages")
    ep: int = Field(
        1,
        ge=1,
        description="expert-parallel size, within the tp group (with --dp-attention: the chips "
        "of a stage holding the experts)",
    )
    dp_attention: bool = Field(
        False,
        description="expert parallelism beyond tp: attention data-parallel over ep / tp groups "
        "of tp chips, the experts over the ep chips of a stage, all-to-all dispatch and combine",
    )
    micro_batches: int | None = Field(
        None,
        ge=1,
        description="micro-batches in flight through the pipeline's stages (1: one batch)",
        json_schema_extra={"unset": "--pp"},
    )
    format: str = format_field("bf16", _FORMATS, "format of the weights and GEMM inputs")
    kv_format: str | None = format_field(None, _FORMATS, "format of the KV cache", unset="--format")
    step_fixed_s: float | None = Field(
        None,
        ge=0,
        description="fixed cost per iteration",
        json_schema_extra={"unset": "tlm/inference/data/fixed_costs.toml"},
    )
    collective_fixed_s: float | None = Field(
        None,
        ge=0,
        description="fixed cost per collective call",
        json_schema_extra={"unset": "tlm/inference/data/fixed_costs.toml"},
    )
    collective_bandwidth_factor: float | None = Field(
        None,
        gt=0,
        le=1,
        description="fraction of the modelled bandwidth the collectives reach (Trainium's "
        "collectives already cross its chips' DMA queues: 1 there)",
        json_schema_extra={"unset": "tlm/inference/data/fixed_costs.toml"},
    )
    request_fixed_s: float | None = Field(
        None,
        ge=0,
        description="the serving stack's time per request outside the iterations (in TTFT)",
        json_schema_extra={"unset": "tlm/inference/data/fixed_costs.toml"},
    )
    context_buckets: _Buckets = Field(
        None,
        description="the prompt lengths the stack compiles, a prompt padded to the next: "
        "nxd (NxD Inference's generated buckets), none, or lengths",
        json_schema_extra={
            "unset": "the hardware's serving stack (shape_buckets of "
            "tlm/inference/data/fixed_costs.toml: nxd on Trainium, none on GPUs)",
            "allowed": "nxd, none, or a comma-separated list of increasing lengths",
        },
    )
    token_buckets: _Buckets = Field(
        None,
        description="the sequence lengths the stack compiles, a decode step reading the next "
        "one's KV: nxd, none, or lengths",
        json_schema_extra={
            "unset": "the hardware's serving stack, as --context-buckets",
            "allowed": "nxd, none, or a comma-separated list of increasing lengths",
        },
    )
    price: str = price_field()

    def bucket_specs(self) -> tuple:
        """Each phase's buckets as given (``nxd``, ``none``, lengths) or the stack's."""
        stack = stack_buckets(self.device().name)[0]
        return tuple(
            stack if given is None else given
            for given in (self.context_buckets, self.token_buckets)
        )

    def device(self):
        """The hardware at the ``price`` picked: an unknown name says what is allowed, a bad
        file why it fails."""
        from ..hardware import HardwareError

        hw = loaded("hardware", self.hardware, hardware_named, HardwareError, HARDWARE_ALLOWED)
        return priced(hw, self.price)

    def replica_resolved(self) -> dict:
        """Check the replica (the model loads, the layout divides it and the system) and
        return the defaults to fill: the KV format and the fixed costs."""
        model = workload_input(self.model)
        hw = self.device()
        try:
            chips = system_chips(hw, self.system)
            check_layout(model, chips, self.tp, self.pp, self.ep, **self.layout_options())
        except InferenceInputError as error:
            raise _input_error(self, error) from None
        if self.micro_batches is not None and self.pp == 1 and self.micro_batches != 1:
            raise InputError(
                "micro_batches", self.micro_batches, "1 when --pp is 1 (micro-batches fill stages)"
            )
        fixed = fixed_costs(hw.name)
        pick = lambda given, shipped: shipped if given is None else given  # noqa: E731
        context, token = self.bucket_specs()
        return {
            "micro_batches": self.pp if self.micro_batches is None else self.micro_batches,
            "kv_format": self.format if self.kv_format is None else self.kv_format,
            **{k: pick(getattr(self, k), getattr(fixed, k)) for k in FIXED_COSTS},
            "context_buckets": context,
            "token_buckets": token,
        }

    def layout_options(self) -> dict:
        """The layout's keyword arguments beyond tp, pp and ep: where the experts are."""
        return {"dp_attention": self.dp_attention}

    def stage_chips(self) -> int:
        """Chips of one pipeline stage: the tp group, or with data-parallel attention the
        ``ep`` chips holding the experts."""
        return self.ep if self.dp_attention else self.tp

    def replica(self, **fields) -> ReplicaSpec:
        """The replica these (resolved) inputs describe; ``fields``: the spec's others (a
        ``max_tokens``). Raises :class:`InferenceInputError` (:func:`_input_error` maps it)."""
        return ReplicaSpec(
            workload_input(self.model),
            self.device(),
            self.system,
            tp=self.tp,
            pp=self.pp,
            ep=self.ep,
            dp_attention=self.dp_attention,
            micro_batches=self.micro_batches,
            fmt=self.format,
            kv_fmt=self.kv_format,
            **fields,
        )

    def fixed(self) -> FixedCosts:
        """The named fixed costs these inputs give (None: the data file's)."""
        return FixedCosts.given(self.device().name, **{k: getattr(self, k) for k in FIXED_COSTS})


class InferInputs(ReplicaInputs):
    """Inputs of ``trnsim infer``."""

    prompt: int = Field(2048, ge=1, le=MAX_REQUEST_TOKENS, description="prompt tokens per request")
    output: int = Field(
        256, ge=1, le=MAX_REQUEST_TOKENS, description="generated tokens per request"
    )
    batch: int = Field(1, ge=1, description="requests served together")
    draft_model: str = Field(
        "none",
        description="speculative decoding's draft model (none: plain decoding)",
        json_schema_extra={"allowed": "none, or " + MODEL_ALLOWED},
    )
    draft_tokens: int = Field(4, ge=1, le=64, description="draft tokens per verify step")
    acceptance: float = Field(0.7, ge=0, le=1, description="probability a draft token is accepted")
    draft_fused: bool = Field(
        False,
        description="the draft runs inside the target's iterations (NxD Inference's fused "
        "speculation), not as separate calls",
    )
    plot: str | None = Field(
        None,
        description="write the time breakdown per phase as a figure",
        json_schema_extra={"allowed": PLOT_ALLOWED},
    )

    def resolve(self) -> InferInputs:
        if self.draft_model != "none":
            loaded(
                "draft_model",
                self.draft_model,
                load_model,
                WorkloadError,
                "none, or " + MODEL_ALLOWED,
            )
        elif self.draft_fused:
            raise InputError("draft_fused", self.draft_fused, "only with --draft-model")
        update = self.replica_resolved()
        plot_path("plot", self.plot)
        return self.model_copy(update=update)

    def estimate(self):
        """:func:`tlm.inference.estimate_of` of these (resolved) inputs."""
        try:
            speculation = None
            if self.draft_model != "none":
                speculation = Speculation(
                    workload_input(self.draft_model),
                    self.draft_tokens,
                    self.acceptance,
                    self.draft_fused,
                )
            requests = RequestBatch(self.batch, self.prompt, self.output)
            sequence = self.prompt + self.output
            buckets = ShapeBuckets.resolved(*self.bucket_specs(), self.prompt, sequence)
            return estimate_of(self.replica(), self.fixed(), requests, speculation, buckets=buckets)
        except InferenceDoesNotFit as error:
            field = _PART_INPUT[error.part]
            raise InputError(
                field,
                getattr(self, field),
                "a replica that fits the chip's HBM (more tp or pp, --format fp8_e4m3, "
                "--kv-format fp8_e4m3, a smaller --batch, --prompt or --output)",
                f"does not fit: {error}",
            ) from None
        except InferenceInputError as error:
            raise _input_error(self, error) from None


def buckets_source(inputs: ReplicaInputs) -> str:
    """What the buckets are and where from: each phase's spec, and the hardware's serving
    stack (with the figure's source in tlm/inference/data/fixed_costs.toml)."""
    said = {"nxd": "NxD Inference's generated", "none": "none"}
    ctx, tok = (said[spec] if isinstance(spec, str) else "given" for spec in inputs.bucket_specs())
    stack, source = stack_buckets(inputs.device().name)
    return (
        f"context buckets {ctx}, token buckets {tok}; {inputs.hardware}'s stack: {stack} "
        f"({source}, tlm/inference/data/fixed_costs.toml)"
    )


def _input_error(inputs: InferInputs, error: InferenceInputError) -> ValueError:
    """The inference model's input error as the study input's (its field under this study's
    name for it); an error on no input of the study stays the model's own line."""
    field = _RENAMED.get(error.field, error.field)
    if field not in type(inputs).model_fields:
        return error
    return InputError(field, getattr(inputs, field), error.allowed)


class PhaseRow(BaseModel):
    """One phase's time by category (the decode: all its steps)."""

    phase: str
    time_s: float
    compute_s: float
    memory_s: float
    communication_s: float
    fixed_s: float


class InferResults(Results):
    """The request's latency, throughput, utilisations and memory; the series: the phases."""

    ttft_s: float = Field(
        description="time to first token: the serving stack's time per request and the "
        "prefill of the batch"
    )
    tpot_s: float = Field(description="mean time per output token after the first")
    e2e_s: float = Field(description="end-to-end latency of a request")
    replica_tokens_per_s: float = Field(description="generated tokens / e2e, one replica")
    chip_tokens_per_s: float
    server_tokens_per_s: float = Field(description="per chip x the server's chips")
    decode_tokens_per_s: float = Field(description="batch / TPOT")
    chips: int = Field(description="tp x pp (ep x pp with --dp-attention)")
    micro_batches: int = Field(description="micro-batches in flight through the stages")
    attention_groups: int = Field(description="ep / tp with --dp-attention, else 1")
    tokens_per_verify: float = Field(description="speculative decoding's expected tokens")
    prefill_mfu_fraction: float
    decode_mfu_fraction: float
    prefill_hbm_utilisation_fraction: float
    decode_hbm_utilisation_fraction: float
    prefill_flop: float
    decode_flop: float
    prefill_hbm_bytes: float = Field(description="all chips of the replica")
    decode_hbm_bytes: float = Field(description="all chips of the replica")
    weights_bytes: float = Field(description="per chip, the peak stage (a draft's included)")
    kv_cache_bytes: float = Field(description="per chip, whole pages")
    activations_bytes: float = Field(description="the prefill's, per chip")
    reserve_bytes: float
    total_bytes: float
    hbm_bytes: float
    fits: bool
    max_batch: int = Field(description="requests that fit at this prompt and context")
    kv_capacity_tokens: int = Field(description="KV tokens that fit beside the prefill")
    power_w: float = Field(description="the replica's share of its servers, facility power")
    energy_per_token_j: float = Field(description="per generated token")
    cost_per_million_tokens_usd: float = Field(
        description="cloud instance-hours per generated token"
    )
    step_fixed_s: float
    collective_fixed_s: float
    collective_bandwidth_factor: float
    request_fixed_s: float
    costs_source: str
    fixed_costs_source: str
    padded_prompt: int = Field(description="the prompt's context-encoding bucket (tokens)")
    context_buckets: list[int] = Field(description="the prompt lengths compiled (none: [])")
    token_buckets: list[int] = Field(description="the sequence lengths compiled (none: [])")
    buckets_source: str = Field(description="given, or the stack's (its source)")
    series: list[PhaseRow] = Field(default=[], exclude=True)


InferResults = with_price_footing(InferResults)


def infer_study(inputs: InferInputs) -> InferResults:
    """The estimate, as results."""
    r = inputs.estimate()
    e = r.engine
    mem = r.memory
    rows = [
        PhaseRow(
            phase=name,
            time_s=p.time_s,
            compute_s=p.compute_s,
            memory_s=p.memory_s,
            communication_s=p.communication_s,
            fixed_s=p.fixed_s,
        )
        for name, p in (("prefill", r.prefill), ("decode", r.decode))
    ]
    money = token_economics(e.hardware, e.chips, r.tokens_per_s)
    results = InferResults(
        ttft_s=r.ttft_s,
        tpot_s=r.tpot_s,
        e2e_s=r.e2e_s,
        replica_tokens_per_s=r.tokens_per_s,
        chip_tokens_per_s=r.tokens_per_s_per_chip,
        server_tokens_per_s=r.tokens_per_s_per_server,
        decode_tokens_per_s=r.decode_tokens_per_s,
        chips=r.chips,
        micro_batches=r.micro_batches,
        attention_groups=r.attention_groups,
        tokens_per_verify=r.tokens_per_verify,
        prefill_mfu_fraction=r.prefill.mfu_fraction,
        decode_mfu_fraction=r.decode.mfu_fraction,
        prefill_hbm_utilisation_fraction=r.prefill.hbm_utilisation_fraction,
        decode_hbm_utilisation_fraction=r.decode.hbm_utilisation_fraction,
        prefill_flop=r.prefill.flop,
        decode_flop=r.decode.flop,
        prefill_hbm_bytes=r.prefill.hbm_bytes,
        decode_hbm_bytes=r.decode.hbm_bytes,
        **{k: mem[k] for k in ("weights_bytes", "kv_cache_bytes", "activations_bytes")},
        reserve_bytes=mem["reserve_bytes"],
        total_bytes=mem["total_bytes"],
        hbm_bytes=mem["hbm_bytes"],
        fits=mem["fits"],
        max_batch=r.max_batch,
        kv_capacity_tokens=e.kv_capacity_tokens,
        **{k: money[k] for k in ("power_w", "energy_per_token_j", "cost_per_million_tokens_usd")},
        **price_footing(e.hardware),
        step_fixed_s=e.step_fixed_s,
        collective_fixed_s=e.collective_fixed_s,
        collective_bandwidth_factor=e.collective_bandwidth_factor,
        request_fixed_s=e.request_fixed_s,
        costs_source=e.costs.source,
        fixed_costs_source=e.fixed_source,
        padded_prompt=int(r.buckets.padded_context(inputs.prompt)),
        context_buckets=list(r.buckets.context),
        token_buckets=list(r.buckets.token),
        buckets_source=buckets_source(inputs),
        series=rows,
    )
    if inputs.plot is not None:
        write_breakdown(inputs, results)
    return results


def write_breakdown(inputs: InferInputs, results: InferResults) -> Path:
    """The time breakdown per phase as stacked bars (the prefill, and the mean decode step:
    one bar each, on their own scales), matplotlib; the format by suffix."""
    steps = max(inputs.output - 1, 1)
    with figure(inputs.plot, ncols=2, figsize=(9, 3.2), save={"bbox_inches": "tight"}) as (
        fig,
        axes,
    ):
        parts = ("compute", "memory", "communication", "fixed")
        for ax, row, per, title in zip(
            axes, results.series, (1, steps), ("prefill (TTFT)", "decode step (TPOT)"), strict=True
        ):
            bottom = 0.0
            for part in parts:
                value = getattr(row, part + "_s") / per * 1e3
                ax.bar([0], [value], bottom=[bottom], label=part)
                bottom += value
            ax.set_xticks([])
            ax.set_ylabel("ms")
            ax.set_title(title)
        axes[1].legend(fontsize=8, loc="upper right")
        fig.suptitle(
            f"{inputs.model} on {results.chips} {inputs.hardware} ({inputs.system}): "
            f"tp {inputs.tp} pp {inputs.pp} ep {inputs.ep}"
            f"{' dp-attention' if inputs.dp_attention else ''}, "
            f"batch {inputs.batch}, {inputs.prompt}+{inputs.output} tokens, {inputs.format}",
            fontsize=9,
        )
    return Path(inputs.plot)


STUDY = register(
    Study(
        "infer",
        InferInputs,
        infer_study,
    )
)
